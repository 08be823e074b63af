"""``lexmem mcp``: a standard-library relay from an agent's stdio to the warm service.

The agent starts ``lexmem mcp`` and speaks MCP on its stdin and stdout. The relay
connects to the service's reader socket (:mod:`lexmem.wire`), asks for an MCP
session, and from then on passes the agent's messages to it and its answers back,
line by line; the service runs the MCP SDK's server session with its store open and
its model loaded. So the agent's first request is answered in milliseconds, not after
seconds of imports.

No service running: the relay starts one, as the hook does, and meanwhile answers the
agent's opening from the answers the service recorded (``mcp-manifest.json``, see
:mod:`lexmem.agents.mcp_server`), of either era of the protocol: the ``initialize``
handshake, or the per-request sessions of 2026-07-28 (``server/discover``, then
requests that carry their protocol version). A request the manifest cannot answer
waits for the service without holding back those it can; once the service is up it
gets the agent's ``initialize`` again (its answer is the agent's already) and what
waited. A service that stops mid-session is replaced the same way: the requests it
had not answered get an error, the rest of the session goes on in the next one.

Where there is no socket to be had (no data folder yet, a platform without
Unix-domain sockets, a service of a lexmem too old to listen) and no manifest to
answer from, :func:`relay` returns ``None`` before reading anything and the caller
serves MCP in this process instead.

Claude Code's hooks call lexmem's ``record_hook_event`` tool (``"type": "mcp_tool"``)
and wait for its answer. The relay answers such a call at once (``{}``, what the tool
answers) and records the event on a thread of its own, as ``lexmem-hook claude`` would:
it hands the payload to the running service over the reader socket (an ``event``
request, in memory, which the service redacts with its rules already compiled), or with
no service to take it records it itself (:func:`lexmem.agents.hookcall.record_payload`:
opt-out first, redaction in memory, then the inbox), in the order the calls came, each
stamped with the time it arrived. The agent waits for no service, no store and no round
trip, and an event made while no service runs yet is kept all the same. The relay does
not exit before every event it answered is recorded.

Imports: the standard library and lexmem's standard-library modules only (a contract
in pyproject.toml says so), and before the agent's opening has its answers only
``json``, ``threading`` and ``signal``: the data folder is found without ``pathlib``
(:mod:`lexmem.places`), the rest is imported when it is first needed (a test checks).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time

from lexmem.agents.hookcall import HOOK_FIELDS, HOOK_TOOL, TEXT_FIELDS
from lexmem.places import SOCKET_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket
    from typing import Any

    from lexmem.config import Paths

__all__ = ["START_WAIT_S", "relay"]

# How long a relay waits for a service it started (a cold start loads the store and
# the model) before it gives up: the requests that wait for it get an error (or, when
# the relay has read nothing yet, the caller serves the session in-process).
START_WAIT_S = 60.0
# A running service with no socket after this long is a lexmem too old to listen.
NO_SOCKET_S = 15.0
# A service the relay started that has not taken its lock after this long failed.
NOT_STARTING_S = 30.0
# The service's answers to an agent's opening requests (lexmem.agents.mcp_server).
MANIFEST = "mcp-manifest.json"
# A per-request (2026-07-28 on) request's protocol version, in its ``params._meta``,
# and the stream a ``subscriptions/listen`` acknowledgement belongs to.
VERSION_KEY = "io.modelcontextprotocol/protocolVersion"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"
LISTEN = "subscriptions/listen"
ACKNOWLEDGED = "notifications/subscriptions/acknowledged"
# JSON-RPC errors the relay answers with itself.
UNSUPPORTED_VERSION = -32022
INTERNAL_ERROR = -32603
# Requests that change nothing, asked again of the next service when the one they went to
# stopped before it answered (a tools/call too when the manifest says its tool only reads).
READS = frozenset({
    "ping", "server/discover", "tools/list", "resources/list", "resources/templates/list",
    "resources/read", "prompts/list", "prompts/get", "completion/complete",
})  # fmt: skip
# What the hooks' tool answers (its text is the hook's output: a JSON object asking for
# nothing), with the structured result its output schema declares.
HOOK_ANSWER = {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"result": "{}"},
               "isError": False}  # fmt: skip
# How long a hand-over of a hook event waits for the service's answer (it writes the
# events in milliseconds; a guard for a service that hangs, after which the relay
# records the event itself: the same event id stores it once).
HANDOVER_WAIT_S = 30.0
# After a service stopped, before the next is started (not in a tight loop, should one
# stop as soon as it starts).
RESTART_PAUSE_S = 0.5


def _reply_line(sock: socket.socket, limit: int | None = None) -> bytes:
    """One line from the service, read byte by byte: nothing past it is taken from the
    socket, since what follows is the agent's to read."""
    line = b""
    while not line.endswith(b"\n"):
        byte = sock.recv(1)
        if not byte or (limit is not None and len(line) > limit):
            raise OSError("the service closed the connection")
        line += byte
    return line


def _paths(home: str) -> Paths:
    """The data folder's places (``pathlib`` and lexmem's configuration are imported here,
    once the agent's opening has its answers)."""
    from pathlib import Path

    from lexmem.config import Paths

    return Paths(Path(home))


def _session(paths: Paths, cwd: str) -> socket.socket | None:
    """A connection with an MCP session accepted by the service, or ``None``."""
    from lexmem import wire

    sock = wire.connect(paths)
    if sock is None:
        return None
    try:
        wire.send_json(sock, {"v": wire.PROTOCOL, "kind": "mcp", "cwd": cwd})
        reply = json.loads(_reply_line(sock, limit=4096))
    except (OSError, ValueError):
        sock.close()
        return None
    if not (isinstance(reply, dict) and reply.get("ok") is True):
        sock.close()
        return None
    sock.settimeout(None)
    return sock


def _wait_for_service(paths: Paths, cwd: str, wait: float) -> socket.socket | None:
    """A session with the service, starting one if none runs (again if it stopped)."""
    from lexmem.capture.hook import start_service
    from lexmem.locks import service_running

    begun = time.monotonic()
    started: float | None = None
    lock_seen: float | None = None
    while time.monotonic() - begun < wait:
        sock = _session(paths, cwd)
        if sock is not None:
            return sock
        now = time.monotonic()
        if service_running(paths):
            lock_seen = lock_seen or now
            if started is None and now - lock_seen > NO_SOCKET_S:
                return None  # a service that does not listen (a lexmem too old)
        else:
            lock_seen = None
            if started is not None and now - started > NOT_STARTING_S:
                return None  # the service we started is not coming up
            if started is None:
                try:
                    start_service(paths)
                except OSError:
                    return None
                started = now
        time.sleep(0.02)
    return None


def _key(ident: Any) -> str:
    """A JSON-RPC id as a dict key (1 and "1" are different ids)."""
    return json.dumps(ident, sort_keys=True)


def _load(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _params(message: dict[str, Any]) -> dict[str, Any]:
    params = message.get("params")
    return params if isinstance(params, dict) else {}


def _hook_fields(arguments: Any) -> dict[str, Any] | None:
    """The hook event's fields from a ``record_hook_event`` call's arguments, or ``None``
    when they are not what the tool takes (the service's server then says what is wrong)."""
    if not isinstance(arguments, dict):
        return None
    name = arguments.get("hook_event_name")
    if not isinstance(name, str) or not name:
        return None
    if any(not isinstance(arguments[k], str) for k in TEXT_FIELDS if k in arguments):
        return None
    return {k: v for k, v in arguments.items() if k in HOOK_FIELDS}


class _HookEvents:
    """The hook events the relay answered, recorded in the order they came on a thread
    that runs while there are some (not a daemon: the interpreter waits for it at exit,
    SIGINT included, so an event the agent was told is recorded is)."""

    def __init__(self, home: str) -> None:
        self.home = home
        self.lock = threading.Lock()
        self.items: list[tuple[dict[str, Any], str, str]] = []
        self.running = False
        self.thread: threading.Thread | None = None

    @staticmethod
    def stamp(fields: dict[str, Any]) -> tuple[dict[str, Any], str, str]:
        """The event with its id and time, taken as it arrives: the agent waits for each
        answer, so arrival is the agent's order."""
        from lexmem.capture.stamps import new_event_id, now_iso

        return fields, new_event_id(), now_iso()

    def put(self, event: tuple[dict[str, Any], str, str]) -> None:
        """Queue an event; :meth:`start` records it (after the agent has its answer: a
        thread starting beside the answer holds the interpreter from writing it)."""
        with self.lock:
            self.items.append(event)

    def start(self) -> None:
        """Record what is queued, on the thread (started if it is not running)."""
        with self.lock:
            if self.running or not self.items:
                return
            self.running = True
            self.thread = threading.Thread(target=self._run, name="lexmem-hook-events")
            self.thread.start()

    def wait(self) -> None:
        """Until every event put is recorded (started here if it was not yet)."""
        self.start()
        while True:
            with self.lock:
                thread = self.thread if self.running else None
            if thread is None:
                return
            thread.join()

    @staticmethod
    def warm() -> None:
        """Import what a hand-over needs (the socket, the wire, the stamps) before the
        first hook call comes: the agent's first turn waits for its answer."""
        from lexmem import wire  # noqa: F401
        from lexmem.capture import stamps  # noqa: F401

    def _run(self) -> None:
        while True:
            with self.lock:
                if not self.items:
                    self.running = False
                    return
                fields, event_id, timestamp = self.items.pop(0)
            self._record(fields, event_id, timestamp)

    def _record(self, fields: dict[str, Any], event_id: str, timestamp: str) -> None:
        """Hand the event to the running service (over the reader socket, in memory: its
        redaction rules are compiled already), or, with none to take it, record it here.

        The hand-over needs the socket and :mod:`lexmem.wire` only; the hook's own
        machinery (``pathlib``, the configuration, the redaction rules) is imported only
        to record here, so a relay of a running service adds no more to the agent's
        machine than that."""
        from lexmem import wire
        from lexmem.agents.hookcall import payload_from_fields

        try:
            payload = payload_from_fields(fields)
            raw = json.dumps(payload).encode("utf-8")
            sock = wire.connect_path(os.path.join(self.home, SOCKET_NAME))
            if sock is not None:
                reply = wire.send_event(sock, "claude", raw, event_id, timestamp, HANDOVER_WAIT_S)
                if isinstance(reply, dict) and reply.get("ok") is True:
                    return
        except Exception as exc:  # noqa: BLE001 - said in the hook's log below
            self._here(fields, event_id, timestamp, exc)
            return
        self._here(fields, event_id, timestamp, None)

    def _here(
        self, fields: dict[str, Any], event_id: str, timestamp: str, failed: Exception | None
    ) -> None:
        """Record the event in this process, as ``lexmem-hook claude`` would."""
        from lexmem.agents.hookcall import payload_from_fields, record_payload
        from lexmem.capture import hook

        paths = _paths(self.home)
        log = hook._Log(paths)
        if failed is not None:
            log.write(
                f"relay: the service did not take a hook event: {type(failed).__name__}: {failed}"
            )
        try:
            payload = payload_from_fields(fields)
            record_payload(paths, payload, event_id=event_id, timestamp=timestamp, log=log)
        except Exception as exc:  # noqa: BLE001 - said in the hook's log, the relay goes on
            log.write(f"relay: a hook event was not recorded: {type(exc).__name__}: {exc}")


class _Relay:
    """One agent's session: its lines to the service, the service's lines back, the
    opening answered from the manifest while no service is connected.

    The agent's lines are read on the main thread; a second thread connects to the
    service (starting one, again if one stops), hands the session over, and copies its
    answers to the agent. ``lock`` guards the session's state; ``send_lock`` keeps the
    lines to the service in the agent's order; ``out_lock`` keeps lines to the agent
    whole."""

    def __init__(
        self, home: str, where: str, manifest: dict[str, Any], stdout_fd: int, wait: float
    ) -> None:
        self.home, self.where, self.wait, self.stdout_fd = home, where, wait, stdout_fd
        sessions, refusals, modern = (manifest.get(k) for k in ("sessions", "refusals", "modern"))
        self.sessions: dict[str, Any] = sessions if isinstance(sessions, dict) else {}
        self.refusals: dict[str, Any] = refusals if isinstance(refusals, dict) else {}
        self.modern: dict[str, Any] = modern if isinstance(modern, dict) else {}
        self.read_only = _read_only_tools(manifest)
        self.lock = threading.Lock()
        self.changed = threading.Condition(self.lock)
        self.send_lock = threading.Lock()
        self.out_lock = threading.Lock()
        self.sock: socket.socket | None = None  # the service's session, once handed over
        self.queue: list[tuple[bytes, str | None]] = []  # lines for the service, in order
        self.inflight: dict[str, tuple[Any, bytes]] = {}  # requests it has not answered
        self.listens: set[str] = set()  # of those, subscriptions/listen streams
        self.delivered: set[str] = set()  # of those, the ones the service has had
        self.reads: set[str] = set()  # of those, the ones that change nothing
        self.asked_again: set[str] = set()  # reads already asked of a second service
        self.acked: set[str] = set()  # streams the agent has had the acknowledgement of
        self.swallow_acks: set[str] = set()  # acknowledgements the agent has had already
        self.initialize: bytes | None = None  # the agent's, replayed to each new service
        self.initialized: bytes | None = None  # the agent's notifications/initialized
        self.legacy: dict[str, Any] | None = None  # the recorded session of its version
        self.replay = False  # the next service gets the agent's initialize first
        self.replays = 0
        self.stdin_open = True
        self.connected = False  # a service took the session at least once
        self.hooks = _HookEvents(home)
        self.service: threading.Thread | None = None  # the service's side, once started
        self._paths: Paths | None = None

    @property
    def paths(self) -> Paths:
        if self._paths is None:
            self._paths = _paths(self.home)
        return self._paths

    def begin(self, sock: socket.socket | None) -> None:
        """Start the service's side (the main thread, once): at once with a session in
        hand, else once the agent's first lines have their answers, so that what it
        imports does not hold up the agent's opening."""
        if self.service is None:
            self.service = threading.Thread(
                target=self.serve, args=(sock,), daemon=True, name="lexmem-service"
            )
            self.service.start()

    # -- the agent's side (the main thread) ---------------------------------------------

    def read(self, stdin_fd: int) -> None:
        """The agent's lines, until it closes stdin."""
        rest = b""
        while True:
            try:
                data = os.read(stdin_fd, 65536)
            except OSError:
                data = b""
            if not data:
                break
            lines = (rest + data).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if line.strip():
                    self._line(line + b"\n")
            self.begin(None)
        self.begin(None)
        if rest.strip():
            self._line(rest)  # a last line without its newline goes as it came
        with self.lock:
            self.stdin_open = False
            sock = self.sock
            self.changed.notify_all()
        if sock is not None:
            with self.send_lock:
                _shut_wr(sock)

    def _needs_service(self) -> bool:
        """Whether a line waits that only the service can answer (``lock`` held): a
        request, but for a stream whose acknowledgement the agent has had from here."""
        return any(
            key is not None and not (key in self.listens and key in self.acked)
            for _, key in self.queue
        )

    def pending(self) -> bool:
        """Whether a request of the agent's still waits for an answer (a stream does not:
        it ends with the agent's input)."""
        with self.lock:
            return self._waiting()

    def _waiting(self) -> bool:
        return any(key not in self.listens for key in self.inflight)

    def _line(self, line: bytes) -> None:
        with self.lock:
            target = self._route(line)
        if target is not None:
            self._to_service(*target)

    def _route(self, line: bytes) -> tuple[socket.socket, bytes, str | None] | None:
        """Answer ``line`` here, queue it for the service, or say where to send it now."""
        message = _load(line)
        method = message.get("method") if message is not None else None
        if message is None or not isinstance(method, str):
            return self._send(line, None)  # an answer to the service's request, or garbage
        params, ident = _params(message), message.get("id")
        if "id" in message and method == "tools/call" and params.get("name") == HOOK_TOOL:
            fields = _hook_fields(params.get("arguments"))
            if fields is not None:
                # Queued before the agent has its answer (Claude Code stops the relay a
                # millisecond after the session's last one: the relay records what is
                # queued before it exits, a stop signal included), recorded after it.
                _HELD[0] += 1  # a stop signal waits until the event's thread runs
                try:
                    self.hooks.put(self.hooks.stamp(fields))
                    self._reply(ident, result=HOOK_ANSWER)
                    self.hooks.start()
                finally:
                    _HELD[0] -= 1
                    if not _HELD[0] and _STOPPED:
                        raise SystemExit(128 + _STOPPED[0])
                return None
        if "id" not in message:  # a notification
            if method == "notifications/initialized":
                self.initialized = line
                if self.sock is None and self.replay:
                    return None  # follows the initialize replayed to the service
            elif (
                method == "notifications/cancelled"
                and _key(params.get("requestId")) not in self.inflight
            ):
                return None  # answered here already: the service never had it
            return self._send(line, None)
        if self.sock is None and self._answered(ident, method, params, line):
            return None
        key = _key(ident)
        if method == "initialize" and self.initialize is None:
            self.initialize, self.legacy = line, self._session(params)
        self.inflight[key] = (ident, line)
        if method in READS or (method == "tools/call" and params.get("name") in self.read_only):
            self.reads.add(key)
        if method == LISTEN:
            self.listens.add(key)
        self.changed.notify_all()
        return self._send(line, key)

    def _send(self, line: bytes, key: str | None) -> tuple[socket.socket, bytes, str | None] | None:
        if self.sock is None:
            self.queue.append((line, key))
            return None
        return self.sock, line, key

    def _to_service(self, sock: socket.socket, line: bytes, key: str | None) -> None:
        with self.send_lock:
            self._deliver(sock, [(line, key)])

    def _deliver(self, sock: socket.socket, lines: list[tuple[bytes, str | None]]) -> None:
        """Send lines to the service (``send_lock`` held). A request it never had (its
        socket closed under the line) goes to the next one instead, in its turn: only
        those it had and did not answer get an error when it is gone."""
        for n, (line, key) in enumerate(lines):
            with self.lock:
                if key is not None and key in self.listens and key in self.acked:
                    self.swallow_acks.add(key)  # the agent has had it from the manifest
            try:
                sock.sendall(line)
            except OSError:
                with self.lock:
                    left = [(ln, k) for ln, k in lines[n:] if k is None or k in self.inflight]
                    if self.sock is sock:
                        self.sock = None  # gone: what follows waits for the next service
                    now = self.sock
                    if now is None:
                        self.queue.extend(left)
                if now is not None:  # the next service took over meanwhile
                    self._deliver(now, left)
                return
            if key is not None:
                with self.lock:
                    if key in self.inflight:
                        self.delivered.add(key)
                    if self.sock is not sock and key in self.inflight and key not in self.listens:
                        self._lost(key)  # it went as the service went: no answer will come

    def _session(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The recorded session of the agent's protocol version (of ``"*"``, one the SDK
        does not know), an answer named by the version it is the same as looked up."""
        answers = self.sessions.get(str(params.get("protocolVersion"))) or self.sessions.get("*")
        if not isinstance(answers, dict) or "initialize" not in answers:
            return None
        found = {}
        for method, answer in answers.items():
            if isinstance(answer, str):
                same = self.sessions.get(answer)
                answer = same.get(method) if isinstance(same, dict) else None
            if isinstance(answer, dict):
                found[method] = answer
        return found if "initialize" in found else None

    def _answered(self, ident: Any, method: str, params: dict[str, Any], line: bytes) -> bool:
        """Answer a request from the manifest, if it can be; whether it was."""
        meta = params.get("_meta")
        version = meta.get(VERSION_KEY) if isinstance(meta, dict) else None
        if version is not None and method != "initialize":
            return self._answered_modern(ident, method, params, version)
        if method == "initialize":
            answers = self._session(params)
            if self.initialize is not None or answers is None:
                return False
            self.initialize, self.legacy, self.replay = line, answers, True
            self._reply(ident, result=answers["initialize"])
            return True
        if isinstance(self.refusals.get(method), dict):
            self._reply(ident, error=self.refusals[method])
            return True
        if self.legacy is None or params.get("cursor"):
            return False
        if method in self.legacy:
            self._reply(ident, result=self.legacy[method])
            return True
        if method == "ping":
            self._reply(ident, result={})
            return True
        return False

    def _answered_modern(
        self, ident: Any, method: str, params: dict[str, Any], version: Any
    ) -> bool:
        if not self.modern:
            return False  # nothing recorded: the service answers
        answers = self.modern.get(str(version))
        if not isinstance(answers, dict):
            supported = {"supported": sorted(self.modern), "requested": version}
            self._reply(ident, error={"code": UNSUPPORTED_VERSION,
                                      "message": "Unsupported protocol version", "data": supported})  # fmt: skip
            return True
        reply = answers.get(method)
        if not isinstance(reply, dict) or params.get("cursor"):
            return False
        if method == LISTEN:
            # The stream is the service's; the agent waits for its acknowledgement only.
            ack = _acknowledgement(ident, params, reply.get("ack"))
            if ack is not None:
                note = {"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": ack}
                self._write(json.dumps(note, separators=(",", ":")).encode() + b"\n")
                self.acked.add(_key(ident))
            return False
        if "result" in reply:
            self._reply(ident, result=reply["result"])
        elif isinstance(reply.get("error"), dict):
            self._reply(ident, error=reply["error"])
        else:
            return False
        return True

    def _reply(self, ident: Any, **outcome: Any) -> None:
        reply = {"jsonrpc": "2.0", "id": ident, **outcome}
        self._write(json.dumps(reply, separators=(",", ":")).encode() + b"\n")

    def _write(self, data: bytes) -> None:
        with self.out_lock:
            try:  # noqa: SIM105 - no contextlib import on the opening's path
                _write_all(self.stdout_fd, data)
            except OSError:
                pass  # the agent is gone

    # -- the service's side (a thread of its own) ---------------------------------------

    def serve(self, sock: socket.socket | None) -> None:
        """Connect, hand over, relay the service's lines; again when it stops, until the
        agent has closed stdin and nothing waits for an answer.

        With no connection yet, the session is handed to the service only when the agent
        asks something the relay cannot answer (its opening, its hook calls and a stream
        the manifest acknowledged are answered here): a session that asks nothing more
        costs the service no session of its own while the agent works. A service that
        is not running is started at once all the same, so it is warm for that question.
        """
        self.hooks.warm()
        if sock is None and not os.path.exists(os.path.join(self.home, SOCKET_NAME)):
            # No service listening: start one now, so it is warm should the agent ask
            # what only it answers. (A socket there is taken for a running service
            # without importing the lock's machinery; one left by a service that died
            # is found out when it is needed, and a service started then.)
            from lexmem.capture.hook import start_service
            from lexmem.locks import service_running

            if not service_running(self.paths):
                try:  # noqa: SIM105
                    start_service(self.paths)
                except OSError:
                    pass
        if sock is None:
            with self.lock:
                self.changed.wait_for(lambda: self._needs_service() or not self.stdin_open)
                if not self._needs_service():
                    return  # the agent is gone and never needed the service
        while True:
            if sock is None:
                sock = _session(self.paths, self.where) or _wait_for_service(
                    self.paths, self.where, self.wait
                )
            if sock is None:
                with self.lock:
                    self._fail("the lexmem service did not start: see `lexmem doctor`")
                    self.changed.wait_for(lambda: bool(self.inflight) or not self.stdin_open)
                    if not self.stdin_open and not self._waiting():
                        return
                continue
            self.connected = True
            try:
                with sock, sock.makefile("rb") as stream:
                    self._hand_over(sock, stream)
                    for line in iter(stream.readline, b""):
                        self._from_service(line)
            except (OSError, ValueError):  # gone, or garbled: a service that is no more
                pass
            with self.lock:
                self.sock = None
                self._gone()
                if not self.stdin_open:
                    self._fail("the lexmem service stopped before it answered")
                    return
            time.sleep(RESTART_PAUSE_S)
            sock = None

    def _hand_over(self, sock: socket.socket, stream: Any) -> None:
        """Give the service the session: the agent's initialize again if the agent had
        its answer elsewhere (keeping the service's), then what waited, in order."""
        with self.send_lock:
            with self.lock:
                replay = self.initialize if self.replay else None
            if replay is not None:
                message = _load(replay) or {}
                self.replays += 1
                message["id"] = rid = f"lexmem-relay-initialize-{self.replays}"
                sock.sendall(json.dumps(message).encode() + b"\n")
                while True:  # the agent has had its answer
                    line = stream.readline()
                    if not line:
                        raise OSError("the service closed the connection")
                    answer = _load(line)
                    if answer is not None and answer.get("id") == rid and "method" not in answer:
                        break
                    self._from_service(line)
            with self.lock:
                initialized = self.initialized if replay is not None else None
                queued, self.queue = self.queue, []
                self.replay = False
                self.sock = sock
                stdin_open = self.stdin_open
            if initialized is not None:
                sock.sendall(initialized)
            self._deliver(sock, queued)
            if not stdin_open:
                _shut_wr(sock)

    def _from_service(self, line: bytes) -> None:
        with self.lock:
            keep = self._keep(line)
        if keep:
            self._write(line)

    def _keep(self, line: bytes) -> bool:
        """Whether the agent gets ``line``: not when it has had that answer already."""
        message = _load(line)
        if message is None:
            return True
        method = message.get("method")
        if method is None and "id" in message:  # an answer
            key = _key(message["id"])
            self.inflight.pop(key, None)
            self.delivered.discard(key)
            self.reads.discard(key)
            self.asked_again.discard(key)
            self.listens.discard(key)
            self.acked.discard(key)
            return True
        if method == ACKNOWLEDGED:
            meta = _params(message).get("_meta")
            key = _key(meta.get(SUBSCRIPTION_KEY) if isinstance(meta, dict) else None)
            if key in self.swallow_acks:
                self.swallow_acks.discard(key)
                return False
            self.acked.add(key)
        return True

    def _gone(self) -> None:
        """The service stopped: what it had and did not answer gets an error, but for
        streams, which the next service carries on (their acknowledgement kept from the
        agent); what it never had waits for the next."""
        again = []
        for key in [k for k in self.inflight if k in self.delivered]:
            if key in self.listens or (key in self.reads and key not in self.asked_again):
                again.append((self.inflight[key][1], key))
                if key not in self.listens:
                    self.asked_again.add(key)  # once: a read that stops services gets an error
            else:
                self._lost(key)
        self.queue[:0] = again
        self.delivered.clear()
        self.swallow_acks.clear()
        self.replay = self.initialize is not None

    def _lost(self, key: str) -> None:
        ident, _ = self.inflight.pop(key)
        self.delivered.discard(key)
        self.reads.discard(key)
        self.asked_again.discard(key)
        self._reply(ident, error={
            "code": INTERNAL_ERROR,
            "message": "the lexmem service stopped before it answered; try again",
        })  # fmt: skip

    def _fail(self, why: str) -> None:
        """No service to be had: every request waiting for one gets an error."""
        for ident, _ in self.inflight.values():
            self._reply(ident, error={"code": INTERNAL_ERROR, "message": why})
        self.inflight.clear()
        self.listens.clear()
        self.delivered.clear()
        self.reads.clear()
        self.asked_again.clear()
        self.queue = [(line, key) for line, key in self.queue if key is None]


def _read_only_tools(manifest: dict[str, Any]) -> frozenset[str]:
    """The tools the service says only read (``readOnlyHint``), from its recorded lists."""
    lists = [s.get("tools/list") for s in (manifest.get("sessions") or {}).values()
             if isinstance(s, dict)]  # fmt: skip
    lists += [(s.get("tools/list") or {}).get("result") for s in
              (manifest.get("modern") or {}).values() if isinstance(s, dict)]  # fmt: skip
    tools = [t for listed in lists if isinstance(listed, dict)
             for t in listed.get("tools") or [] if isinstance(t, dict)]  # fmt: skip
    return frozenset(
        t["name"] for t in tools if isinstance(t.get("name"), str)
        and isinstance(t.get("annotations"), dict) and t["annotations"].get("readOnlyHint") is True
    )  # fmt: skip


def _acknowledgement(ident: Any, params: dict[str, Any], recorded: Any) -> dict[str, Any] | None:
    """The acknowledgement of a ``subscriptions/listen``, as the service sends it: what
    was asked and the service honours, under the stream's id; ``None`` when the stream
    asks for something the recording did not (the service answers that)."""
    asked = params.get("notifications")
    if not isinstance(recorded, dict) or not isinstance(asked, dict):
        return None
    honoured, meta = recorded.get("notifications"), recorded.get("_meta")
    wanted = {k: v for k, v in asked.items() if v}
    if not isinstance(honoured, dict) or any(k not in honoured for k in wanted):
        return None
    return {"_meta": {**(meta if isinstance(meta, dict) else {}), SUBSCRIPTION_KEY: ident},
            "notifications": wanted}  # fmt: skip


def _manifest(home: str) -> dict[str, Any] | None:
    """The service's recorded answers, if a service of this very lexmem wrote them."""
    from lexmem import __version__

    try:
        with open(os.path.join(home, MANIFEST), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("lexmem") != __version__:
        return None
    return data if isinstance(data.get("sessions"), dict) else None


def _shut_wr(sock: socket.socket) -> None:
    import socket

    try:  # noqa: SIM105
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


# While a hook call is queued, answered and its recording started, a stop signal is held
# (a count, not contextlib: nothing more to import) and acted on right after: raised in
# the middle, it could leave an answered event with no thread to record it.
_HELD = [0]
_STOPPED: list[int] = []


def _quietly(signum: int, frame: Any) -> None:
    """The agent stops its MCP server with SIGINT (or SIGTERM): an exit, not an error."""
    if _HELD[0]:
        _STOPPED.append(signum)
        return
    raise SystemExit(128 + signum)


def relay(
    home: str, cwd: str | None = None, *, stdin_fd: int = 0, stdout_fd: int = 1,
    wait: float = START_WAIT_S,
) -> int | None:  # fmt: skip
    """Relay one MCP session for the data folder ``home`` (an absolute path, see
    :func:`lexmem.places.data_home`); its exit code, once every hook event it answered is
    recorded (the caller may end the process at once), or ``None`` when the caller must
    serve it.

    What the agent's opening waits for is only the interpreter, ``json`` and the
    manifest: the socket is imported when a hook call is handed to the service, and
    ``pathlib``, lexmem's configuration and the hook only when the relay must start the
    service or record an event itself."""
    if os.name != "posix" or not os.path.isdir(home):
        # No Unix-domain sockets (lexmem.wire.available: Windows), or no data folder
        # yet (a reader never creates one).
        return None
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, _quietly)
        # The agent's next line waits for the interpreter: while the hook events' thread
        # redacts, hand it over every half millisecond, not every five.
        sys.setswitchinterval(0.0005)
    where = cwd or os.getcwd()
    manifest = _manifest(home)
    sock = None
    if manifest is None:
        # Nothing to answer from: the service first, or the caller serves the session.
        from lexmem import wire

        if not wire.available():
            return None
        paths = _paths(home)
        sock = _session(paths, where) or _wait_for_service(paths, where, wait)
        if sock is None:
            return None
    session = _Relay(home, where, manifest or {}, stdout_fd, wait)
    if sock is not None:
        session.begin(sock)
    try:
        session.read(stdin_fd)
    finally:  # a stop signal included: what the agent was answered is recorded
        session.hooks.start()
    if sock is None and not session.connected and not session.pending():
        session.hooks.wait()
        return 0  # all the agent asked was answered here: no service needed
    if session.service is not None:
        session.service.join()
    session.hooks.wait()
    return 0 if session.connected else 1
