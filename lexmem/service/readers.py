"""The service's reader socket: warm answers for CLI reads and MCP sessions.

:class:`ReaderServer` listens on ``<data>/reader.sock`` (:mod:`lexmem.wire`) while the
service runs, checks each peer's user id, reads the request line and hands the
connection to the handler registered for its ``kind``. The handlers themselves come
from the entry point that runs the service (``lexmem serve``, the tray app): the CLI
renders read commands, the MCP server runs a session; this module knows neither.

Many readers at once: each connection has its own thread. Nothing here writes the
store: writes still travel as inbox events to the writer loop.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import socket
import stat
import threading
from collections.abc import Callable, Mapping
from typing import Any, BinaryIO

from lexmem import wire
from lexmem.config import Paths, secure_umask

__all__ = ["Handler", "ReaderServer", "Request", "keep_logging_off_stderr"]

log = logging.getLogger("lexmem.readers")

Request = dict[str, Any]
# A handler serves one connection: the request line (already read), the socket, and
# the buffered binary stream the request was read from (it may hold what followed).
Handler = Callable[[Request, socket.socket, BinaryIO], None]


def keep_logging_off_stderr() -> None:
    """Give the root logger a handler if it has none. Without one, Python's last-resort
    handler writes warnings to ``sys.stderr``, and building an MCP server calls
    ``logging.basicConfig`` with a handler on stderr, which would then print every lexmem
    record there. In a service, stderr is its terminal and, while it renders a command
    for a reader, that reader's output; its own records go to its log file."""
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.NullHandler())


class ReaderServer:
    """The Unix-domain socket of one data folder, served on background threads."""

    def __init__(
        self, paths: Paths, handlers: Mapping[str, Handler], *,
        warm: Callable[[], None] | None = None,
    ) -> None:  # fmt: skip
        """``warm``: run once on a thread of its own when the socket is up (what makes
        the first reader's answer quick: imports, recorded answers)."""
        self.paths = paths
        self.handlers = dict(handlers)
        self.warm = warm
        self.path = wire.socket_path(paths)
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._inode: tuple[int, int] | None = None

    # -- life ---------------------------------------------------------------------

    def start(self) -> bool:
        """Bind and listen; ``False`` (logged) where a socket cannot be had here."""
        if not wire.available():
            return False
        keep_logging_off_stderr()
        self._remove_stale()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            with secure_umask(), wire.address(self.path) as where:
                listener.bind(where)
            os.chmod(self.path, 0o600)
            listener.listen(64)
            st = os.lstat(self.path)
        except OSError as exc:
            listener.close()
            log.warning("[MEM:READERS] no reader socket at %s: %s", self.path, exc)
            return False
        self._inode = (st.st_dev, st.st_ino)
        self._listener = listener
        self._stop.clear()
        self._thread = threading.Thread(target=self._serve, name="lexmem-readers", daemon=True)
        self._thread.start()
        log.info("[MEM:READERS] listening on %s", self.path)
        if self.warm is not None:
            threading.Thread(target=self._warm, name="lexmem-readers-warm", daemon=True).start()
        return True

    def _warm(self) -> None:
        assert self.warm is not None
        try:
            self.warm()
        except Exception:
            log.exception("[MEM:READERS] warming up failed (readers are answered all the same)")

    def stop(self) -> None:
        """Stop listening, remove the socket, and end the connections still open."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None
            self._remove_own()
        with self._lock:
            live = list(self._open)
        for conn in live:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def __enter__(self) -> ReaderServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def clients(self) -> int:
        with self._lock:
            return len(self._open)

    def _remove_stale(self) -> None:
        # The caller holds the writer's lock: a socket left here is a dead service's.
        with contextlib.suppress(FileNotFoundError):
            if stat.S_ISSOCK(os.lstat(self.path).st_mode):
                self.path.unlink()

    def _remove_own(self) -> None:
        with contextlib.suppress(OSError):
            st = os.lstat(self.path)
            if (st.st_dev, st.st_ino) == self._inode:
                self.path.unlink()

    # -- serving ---------------------------------------------------------------------

    def _serve(self) -> None:
        listener = self._listener
        assert listener is not None
        with selectors.DefaultSelector() as sel:
            sel.register(listener, selectors.EVENT_READ)
            while not self._stop.is_set():
                if not sel.select(timeout=0.5):
                    continue
                try:
                    conn, _ = listener.accept()
                except OSError:
                    continue
                threading.Thread(
                    target=self._connection, args=(conn,), name="lexmem-reader", daemon=True
                ).start()

    def _connection(self, conn: socket.socket) -> None:
        with self._lock:
            self._open.add(conn)
        try:
            with conn, conn.makefile("rb") as stream:
                self._answer(conn, stream)
        except OSError as exc:  # the reader went away
            log.debug("[MEM:READERS] connection ended: %s", exc)
        except Exception:
            log.exception("[MEM:READERS] a reader's request failed")
        finally:
            with self._lock:
                self._open.discard(conn)

    def _answer(self, conn: socket.socket, stream: BinaryIO) -> None:
        uid = wire.peer_uid(conn)
        if uid is not None and uid != os.getuid():
            log.warning("[MEM:READERS] refused a reader of user id %d", uid)
            return
        conn.settimeout(30)  # the request line arrives at once, or never
        try:
            request = wire.read_line(stream)
        except (ValueError, UnicodeDecodeError) as exc:
            wire.send_json(conn, {"error": f"bad request: {exc}"})
            return
        conn.settimeout(None)
        if not isinstance(request, dict):
            if request is not None:
                wire.send_json(conn, {"error": "bad request: not a JSON object"})
            return
        if request.get("v") != wire.PROTOCOL:
            wire.send_json(conn, {"error": f"protocol {request.get('v')!r} is not {wire.PROTOCOL}"})
            return
        handler = self.handlers.get(str(request.get("kind")))
        if handler is None:
            wire.send_json(conn, {"error": f"no such request: {request.get('kind')!r}"})
            return
        handler(request, conn, stream)
