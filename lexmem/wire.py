"""The reader socket's wire: where the socket is, how a reader reaches it, what it says.

The running service answers readers (CLI reads, MCP sessions) over one Unix-domain
socket inside the private data folder (``<data>/reader.sock``, mode 0600 in the 0700
folder; the service also checks the peer's user id). Never TCP. This module is the
part both sides share, and the CLI's client side; it imports only the standard
library, so a reader that finds the service pays for nothing else.

A conversation is one connection. The reader sends one JSON line, the request::

    {"v": 1, "kind": "cli", "argv": [...], "cwd": "...", "columns": 120, "tty": [...]}
    {"v": 1, "kind": "mcp", "cwd": "..."}

    {"v": 1, "kind": "event", "adapter": "claude", "cwd": null, "event_id": "...",
     "timestamp": "...", "size": N}

and the service answers ``cli`` with one JSON line, ``{"exit": N, "stdout": "...",
"stderr": "..."}``; ``mcp`` with ``{"ok": true}`` (or ``{"error": "..."}``), after
which the connection carries the MCP stream itself (newline-delimited JSON-RPC) both
ways until either side closes it. ``event`` is followed by ``size`` bytes, an agent's
hook payload that ``lexmem-hook`` hands over unredacted (memory only, never the disk);
the service redacts it and writes its events (:mod:`lexmem.service.intake`), then
answers ``{"ok": true, "events": [ids]}``.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import socket
import stat
import sys

from lexmem.places import SOCKET_NAME

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence
    from pathlib import Path
    from typing import Any, TextIO

    from lexmem.config import Paths

__all__ = [
    "CLOSED_PIPE",
    "MAX_REQUEST",
    "PROTOCOL",
    "READ_COMMANDS",
    "SOCKET_NAME",
    "address",
    "ask_cli",
    "available",
    "closed_pipe",
    "connect",
    "connect_path",
    "peer_uid",
    "read_line",
    "send_event",
    "send_json",
    "socket_path",
]

PROTOCOL = 1
MAX_REQUEST = 1 << 20  # a request line longer than 1 MiB is refused

# The CLI commands the service answers for a reader: they only read.
READ_COMMANDS = frozenset({"search", "show", "list", "stats", "digest", "audit", "sessions"})

# A Unix-domain socket's path must fit in sun_path (108 bytes on Linux, 104 on macOS).
_SUN_PATH = 100


def available() -> bool:
    """Whether this platform has Unix-domain sockets and user ids to check them by (a
    Windows build may have the one without the other: lexmem then works without them)."""
    return hasattr(socket, "AF_UNIX") and hasattr(os, "getuid")


def socket_path(paths: Paths) -> Path:
    return paths.home / SOCKET_NAME


@contextlib.contextmanager
def address(path: str | os.PathLike[str]) -> Iterator[str]:
    """An address for ``path`` that fits in ``sun_path``.

    A deep data folder (a test's temporary folder, a long home path) gives a path too
    long to bind or connect to; on Linux the folder is then named through an ``O_PATH``
    descriptor (``/proc/self/fd/N/reader.sock``), which reaches the same inode.
    """
    text = os.fspath(path)
    if len(os.fsencode(text)) < _SUN_PATH:
        yield text
        return
    o_path = getattr(os, "O_PATH", 0)
    if not (o_path and sys.platform.startswith("linux")):
        raise OSError(errno.ENAMETOOLONG, "the data folder's path is too long for a socket")
    folder, name = os.path.split(text)
    fd = os.open(folder, o_path | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def connect(paths: Paths, timeout: float = 2.0) -> socket.socket | None:
    """A connection to the service's reader socket; ``None`` when no service answers.

    Only a socket owned by this user is trusted (the data folder is 0700 anyway).
    """
    return connect_path(socket_path(paths), timeout)


def connect_path(path: str | os.PathLike[str], timeout: float = 2.0) -> socket.socket | None:
    """:func:`connect` to the reader socket at ``path`` (``pathlib`` not needed: the relay
    hands its hook events over with this)."""
    if not available():
        return None
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISSOCK(st.st_mode) or st.st_uid != os.getuid():
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    try:
        with address(path) as where:
            sock.connect(where)
    except OSError:
        sock.close()
        return None
    return sock


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end; ``None`` where it cannot be asked."""
    import struct

    so_peercred = getattr(socket, "SO_PEERCRED", None)
    if so_peercred is not None:  # Linux: struct ucred {pid, uid, gid}
        raw = sock.getsockopt(socket.SOL_SOCKET, so_peercred, struct.calcsize("3i"))
        return int(struct.unpack("3i", raw)[1])
    if sys.platform == "darwin":  # LOCAL_PEERCRED: struct xucred {version, uid, ...}
        raw = sock.getsockopt(0, 0x001, struct.calcsize("2I") + 16 * 4 + 4)
        return int(struct.unpack_from("2I", raw)[1])
    return None


def send_event(
    sock: socket.socket, adapter: str, raw: bytes, event_id: str, timestamp: str, wait: float
) -> Any:
    """Hand one agent payload to the service (``{"kind": "event"}``, see
    :mod:`lexmem.service.intake`) over ``sock``, which this closes; the service's answer
    (``{"ok": true, ...}`` once the events are written), or None (it went away)."""
    try:
        with sock:
            sock.settimeout(wait)
            send_json(sock, {"v": PROTOCOL, "kind": "event", "adapter": adapter, "cwd": None,
                             "event_id": event_id, "timestamp": timestamp, "size": len(raw)})  # fmt: skip
            sock.sendall(raw)
            with sock.makefile("rb") as stream:
                return read_line(stream)
    except (OSError, ValueError):
        return None


def send_json(sock: socket.socket, value: Any) -> None:
    sock.sendall(json.dumps(value, ensure_ascii=False).encode("utf-8") + b"\n")


def read_line(stream: Any, limit: int = MAX_REQUEST) -> Any:
    """One JSON line from a binary stream; ``None`` at the end of the stream."""
    line = stream.readline(limit + 1)
    if not line:
        return None
    if len(line) > limit:
        raise ValueError("the request is longer than 1 MiB")
    return json.loads(line)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def ask_cli(
    paths: Paths, argv: Sequence[str], *, cwd: str | None = None,
    stdout: TextIO | None = None, stderr: TextIO | None = None,
) -> int | None:  # fmt: skip
    """Have the running service run the read command ``argv``; its exit code.

    ``None`` when no service answered (no socket, refused, or it went away before
    answering): the caller then does the work itself. The output is the service's
    rendering of the same command, written to ``stdout`` and ``stderr``.
    """
    if not argv or argv[0] not in READ_COMMANDS:
        return None
    out = sys.stdout if stdout is None else stdout
    err = sys.stderr if stderr is None else stderr
    sock = connect(paths)
    if sock is None:
        return None
    import shutil

    try:
        send_json(sock, {
            "v": PROTOCOL, "kind": "cli", "argv": list(argv), "cwd": cwd or os.getcwd(),
            "columns": shutil.get_terminal_size((120, 24)).columns,
            "tty": [_isatty(sys.stdin), _isatty(out), _isatty(err)],
            "debug": bool(os.environ.get("LEXMEM_DEBUG")),
        })  # fmt: skip
        sock.settimeout(None)  # a read may wait out the writer's maintenance job
        with sock.makefile("rb") as stream:
            reply = read_line(stream, limit=1 << 31)
    except (OSError, ValueError):
        return None
    finally:
        sock.close()
    if not isinstance(reply, dict) or not isinstance(reply.get("exit"), int):
        return None
    try:
        out.write(str(reply.get("stdout", "")))
        out.flush()
    except BrokenPipeError:
        return closed_pipe(out)
    err.write(str(reply.get("stderr", "")))
    err.flush()
    return int(reply["exit"])


# The exit code of a command whose output's reader went away (``lexmem list | head -1``):
# what a shell reports for a tool SIGPIPE ended (128 + 13); nothing more is said.
CLOSED_PIPE = 141


def closed_pipe(stream: Any) -> int:
    """End quietly after a closed output pipe: what is left for ``stream`` (standard
    output) goes nowhere, rather than to a traceback when the process exits."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, stream.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return CLOSED_PIPE
