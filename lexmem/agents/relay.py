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
import os
import socket
import threading
import time

from lexmem import wire
from lexmem.capture.hook import start_service
from lexmem.locks import service_running

TYPE_CHECKING = False
if TYPE_CHECKING:
    from lexmem.config import Paths

__all__ = ["START_WAIT_S", "relay"]

# How long a relay waits for a service it started (a cold start loads the store and
# the model) before it gives up and the caller serves in-process.
START_WAIT_S = 60.0
# A running service with no socket after this long is a lexmem too old to listen.
NO_SOCKET_S = 5.0


def _session(paths: Paths, cwd: str) -> socket.socket | None:
    """A connection with an MCP session accepted by the service, or ``None``."""
    sock = wire.connect(paths)
    if sock is None:
        return None
    try:
        wire.send_json(sock, {"v": wire.PROTOCOL, "kind": "mcp", "cwd": cwd})
        line = b""
        while not line.endswith(b"\n"):  # byte by byte: nothing past the reply is read
            byte = sock.recv(1)
            if not byte or len(line) > 4096:
                raise OSError("the service closed the connection")
            line += byte
        import json

        reply = json.loads(line)
    except (OSError, ValueError):
        sock.close()
        return None
    if not (isinstance(reply, dict) and reply.get("ok") is True):
        sock.close()
        return None
    sock.settimeout(None)
    return sock


def _wait_for_service(paths: Paths, cwd: str, wait: float) -> socket.socket | None:
    started = False
    if not service_running(paths):
        try:
            start_service(paths)
        except OSError:
            return None
        started = True
    begun = time.monotonic()
    lock_seen = begun if service_running(paths) else None
    while time.monotonic() - begun < wait:
        sock = _session(paths, cwd)
        if sock is not None:
            return sock
        now = time.monotonic()
        if service_running(paths):
            lock_seen = lock_seen or now
            if not started and now - lock_seen > NO_SOCKET_S:
                return None  # a service that does not listen
        elif started and now - begun > NO_SOCKET_S:
            return None  # the service we started is not coming up
        time.sleep(0.02)
    return None


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
    if not wire.available() or not paths.store.is_dir():
        return None  # no socket here, or no data folder yet: a reader never creates one
    where = cwd or os.getcwd()
    sock = _session(paths, where) or _wait_for_service(paths, where, wait)
    if sock is None:
        return None
    feeder = threading.Thread(target=_pump_in, args=(sock, stdin_fd), daemon=True)
    feeder.start()
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                break
            view = memoryview(data)
            while view:
                view = view[os.write(stdout_fd, view) :]
    except OSError:
        pass
    finally:
        sock.close()
    return 0
