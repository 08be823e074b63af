"""``lexmem mcp``: a standard-library relay from an agent's stdio to the warm service.

The agent starts ``lexmem mcp`` and speaks MCP on its stdin and stdout. The relay
connects to the service's reader socket (:mod:`lexmem.wire`), asks for an MCP
session, and from then on copies bytes both ways; the service runs the MCP SDK's
server session with its store open and its model loaded. So the agent's first
``initialize`` is answered in milliseconds, not after seconds of imports.

No service running: the relay starts one, as the hook does, and connects as soon as
its socket is up. Where there is no socket to be had (no data folder yet, a platform
without Unix-domain sockets, a service of a lexmem too old to listen), :func:`relay`
returns ``None`` and the caller serves MCP in this process instead.

Imports: the standard library and lexmem's standard-library modules only (a contract
in pyproject.toml says so).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import socket
import threading
import time

from lexmem import wire
from lexmem.capture.hook import start_service
from lexmem.locks import service_running

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from lexmem.config import Paths

__all__ = ["START_WAIT_S", "relay"]

# How long a relay waits for a service it started (a cold start loads the store and
# the model) before it gives up and the caller serves in-process.
START_WAIT_S = 60.0
# A running service with no socket after this long is a lexmem too old to listen.
NO_SOCKET_S = 15.0
# A service the relay started that has not taken its lock after this long failed.
NOT_STARTING_S = 30.0
# The service's answers to an agent's opening requests (lexmem.agents.mcp_server).
MANIFEST = "mcp-manifest.json"


def select_works(fd: int) -> bool:
    """Whether ``select`` can wait on ``fd`` (not on Windows, where this never runs)."""
    try:
        select.select([fd], [], [], 0)
    except (OSError, ValueError):
        return False
    return True


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


def _session(paths: Paths, cwd: str) -> socket.socket | None:
    """A connection with an MCP session accepted by the service, or ``None``."""
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


class _Opening:
    """The agent's opening requests, answered from the service's manifest while the
    service starts; what cannot be answered yet waits for it."""

    def __init__(self, manifest: dict[str, Any], stdout_fd: int) -> None:
        self.sessions = manifest.get("sessions") or {}
        self.stdout_fd = stdout_fd
        self.answers: dict[str, Any] | None = None
        self.initialize: dict[str, Any] | None = None  # the agent's, replayed to the service
        self.initialized: bytes | None = None
        self.waiting: list[bytes] = []  # lines for the service, in order
        self.rest = b""  # a partial line

    def feed(self, data: bytes) -> None:
        lines = (self.rest + data).split(b"\n")
        self.rest = lines.pop()
        for line in lines:
            if line.strip():
                self._line(line + b"\n")

    def _line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            message = None
        if not isinstance(message, dict):
            self.waiting.append(line)
            return
        method, ident = message.get("method"), message.get("id")
        params = message.get("params") or {}
        if method == "initialize" and ident is not None and self.initialize is None:
            answers = self.sessions.get(str(params.get("protocolVersion")))
            if isinstance(answers, dict) and not self.waiting:
                self.initialize, self.answers = message, answers
                self._answer(ident, answers["initialize"])
                return
        elif self.answers is not None and method == "notifications/initialized":
            if not self.waiting:
                self.initialized = line
                return
        elif self.answers is not None and ident is not None and not params.get("cursor"):
            # A listing does not depend on what else waits: answered now, in any order.
            if method in self.answers and method != "initialize":
                self._answer(ident, self.answers[method])
                return
            if method == "ping":
                self._answer(ident, {})
                return
        self.waiting.append(line)

    def _answer(self, ident: Any, result: Any) -> None:
        reply = json.dumps({"jsonrpc": "2.0", "id": ident, "result": result}).encode()
        _write_all(self.stdout_fd, reply + b"\n")

    def hand_over(self, sock: socket.socket) -> None:
        """Replay the agent's opening to the service, keep its reply to the initialize
        (the agent has had one), then send on what waited."""
        if self.initialize is not None:
            replay = dict(self.initialize, id="lexmem-relay-initialize")
            sock.sendall(json.dumps(replay).encode() + b"\n")
            _reply_line(sock)  # the agent has had its answer
            sock.sendall(
                self.initialized or b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n'
            )
        for line in self.waiting:
            sock.sendall(line)
        if self.rest:
            sock.sendall(self.rest)


def _opening(
    paths: Paths, where: str, manifest: dict[str, Any], stdin_fd: int, stdout_fd: int,
    wait: float,
) -> tuple[socket.socket | None, bool]:  # fmt: skip
    """Wait for the service while answering the agent's opening from ``manifest``: the
    session handed over to the service, and whether the agent's stdin is still open."""
    found: list[socket.socket | None] = []
    ready = threading.Event()

    def connect() -> None:
        found.append(_session(paths, where) or _wait_for_service(paths, where, wait))
        ready.set()

    threading.Thread(target=connect, daemon=True).start()
    opening = _Opening(manifest, stdout_fd)
    stdin_open = True
    while not ready.is_set():
        readable, _, _ = select.select([stdin_fd], [], [], 0.02)
        if readable:
            data = os.read(stdin_fd, 65536)
            if not data:  # the agent said all it will say; it may still wait for answers
                stdin_open = False
                ready.wait(wait)
                break
            opening.feed(data)
    sock = found[0] if found else None
    if sock is None:
        return None, stdin_open
    try:
        opening.hand_over(sock)
        if not stdin_open:
            sock.shutdown(socket.SHUT_WR)
    except OSError:
        sock.close()
        return None, stdin_open
    return sock, stdin_open


def _manifest(paths: Paths) -> dict[str, Any] | None:
    """The service's recorded answers, if a service of this very lexmem wrote them."""
    from lexmem import __version__

    try:
        with open(paths.home / MANIFEST, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("lexmem") != __version__:
        return None
    return data if isinstance(data.get("sessions"), dict) else None


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pump_in(sock: socket.socket, stdin_fd: int) -> None:
    """The agent's requests to the service, until the agent closes stdin."""
    try:
        while True:
            data = os.read(stdin_fd, 65536)
            if not data:
                break
            sock.sendall(data)
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_WR)


def relay(
    paths: Paths, cwd: str | None = None, *, stdin_fd: int = 0, stdout_fd: int = 1,
    wait: float = START_WAIT_S,
) -> int | None:  # fmt: skip
    """Relay one MCP session; its exit code, or ``None`` when the caller must serve it."""
    if not wire.available() or not paths.home.is_dir():
        return None  # no socket here, or no data folder yet: a reader never creates one
    where = cwd or os.getcwd()
    manifest = _manifest(paths) if select_works(stdin_fd) else None
    if manifest is not None:
        # The agent hears lexmem's tools now, whatever the service is doing (starting,
        # or busy with the events this very session's hooks just sent it).
        sock, stdin_open = _opening(paths, where, manifest, stdin_fd, stdout_fd, wait)
        if sock is None:
            return 1  # the agent's opening was read: no going back to in-process
    else:
        sock, stdin_open = _session(paths, where) or _wait_for_service(paths, where, wait), True
        if sock is None:
            return None
    if stdin_open:
        threading.Thread(target=_pump_in, args=(sock, stdin_fd), daemon=True).start()
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            _write_all(stdout_fd, data)
    except OSError:
        pass
    finally:
        sock.close()
    return 0
