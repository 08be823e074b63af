"""The embedding model in a process of its own, for a long-lived lexmem.

A process that loads the model keeps, after it drops it, what loading brought in:
onnxruntime's and the tokenizer's libraries, fastembed and everything it imports (an
image library, an HTTP client, a progress-bar library), and freed heap the C allocator
does not hand back: about 70 MB more than before the first load. The tray app and
``lexmem serve`` load the model now and then and stay up for days, so theirs runs here
instead (:class:`ModelProcess`, running :func:`lexmem.embedder.child_main`), and
dropping it ends the process: every byte goes back to the system. A one-shot command
loads it in its own process, as before.

The protocol, over the child's stdin and stdout: the parent sends frames of a 4-byte
big-endian length and that many bytes of JSON. The first is ``{"settings": {...},
"models_dir": "..."}``; the child answers with a frame ``{"dim": N}`` once the model
has loaded, or ``{"error": "one line"}`` and exits. Then each ``{"texts": [...],
"batch_size": N}`` is answered by a frame ``{"shape": [rows, dim]}`` followed by the
vectors as little-endian float32, or by ``{"error": "..."}``. End of input ends it.
"""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from lexmem.config import is_frozen
from lexmem.errors import ModelError
from lexmem.settings import EmbeddingSettings

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["ModelProcess", "can_isolate", "receive", "send"]

_HEADER = struct.Struct(">I")
# A frame larger than this is not lexmem's (texts are cut long before).
_MAX_FRAME = 256 << 20
LOAD_TIMEOUT_S = 300.0


def can_isolate() -> bool:
    """Whether this lexmem can start the model's process: an interpreter to run it with
    (a bundle's executable is lexmem itself, not Python)."""
    return not is_frozen() and bool(sys.executable)


def send(out: IO[bytes], payload: dict[str, Any], body: bytes = b"") -> None:
    data = json.dumps(payload).encode("utf-8")
    out.write(_HEADER.pack(len(data)) + data + body)
    out.flush()


def _read_exact(stream: IO[bytes], n: int) -> bytes:
    chunks = []
    while n:
        chunk = stream.read(n)
        if not chunk:
            raise EOFError("the stream ended")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def receive(stream: IO[bytes]) -> dict[str, Any]:
    (size,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    if size > _MAX_FRAME:
        raise ValueError(f"a frame of {size} bytes")
    value = json.loads(_read_exact(stream, size))
    if not isinstance(value, dict):
        raise ValueError("a frame that is not an object")
    return value


class ModelProcess:
    """The model in a child process, with the interface :class:`~lexmem.embedder.Embedder`
    uses of a loaded model: :meth:`embed` (texts to vectors) and :meth:`close`.

    Starting it loads the model there and raises :class:`ModelError` with the child's
    one-line reason when it cannot. One embedding at a time (a lock). A child that is
    gone (killed, crashed) is started again and asked once more: an embedding has no
    side effects to repeat.
    """

    def __init__(self, settings: EmbeddingSettings, models_dir: Path) -> None:
        self.settings = settings
        self.models_dir = models_dir
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        with self._lock:
            self._start()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def _error(self, message: str) -> ModelError:
        return ModelError(message, model=self.settings.model)

    def _start(self) -> None:
        proc = subprocess.Popen(
            [sys.executable, "-m", "lexmem.embedder"],  # its child_main
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # onnxruntime's warnings; failures come as frames
            close_fds=True,
        )
        first = {"settings": asdict(self.settings), "models_dir": str(self.models_dir)}
        try:
            reply = self._exchange(proc, first)
        except _Gone as gone:
            _stop(proc)
            raise self._error(
                f"the model's process did not start (exit code {proc.returncode}: {gone})"
            ) from gone
        except BaseException:
            _stop(proc)
            raise
        if "error" in reply:
            _stop(proc)
            raise self._error(str(reply["error"]))
        self._proc = proc

    def _exchange(self, proc: subprocess.Popen[bytes], request: dict[str, Any]) -> dict[str, Any]:
        """Send ``request`` and read the child's answer frame; :class:`_Gone` when the
        pipe breaks (a child that hangs past the timeout is killed, which breaks it)."""
        assert proc.stdin is not None and proc.stdout is not None
        timer = threading.Timer(LOAD_TIMEOUT_S, proc.kill)
        timer.daemon = True
        timer.start()
        try:
            send(proc.stdin, request)
            return receive(proc.stdout)
        except (EOFError, OSError) as exc:
            raise _Gone(str(exc) or type(exc).__name__) from exc
        finally:
            timer.cancel()

    def embed(self, texts: Sequence[str], batch_size: int = 64) -> npt.NDArray[np.float32]:
        import numpy as np

        request = {"texts": list(texts), "batch_size": int(batch_size)}
        with self._lock:
            for attempt in (1, 2):
                if self._proc is None or self._proc.poll() is not None:
                    self._start()
                proc = self._proc
                assert proc is not None and proc.stdout is not None
                try:
                    reply = self._exchange(proc, request)
                    if "error" in reply:
                        raise self._error(str(reply["error"]))
                    rows, dim = (int(n) for n in reply["shape"])
                    body = _read_exact(proc.stdout, rows * dim * 4)
                except (_Gone, EOFError, OSError) as exc:
                    _stop(proc)
                    self._proc = None
                    if attempt == 2:
                        raise self._error(f"the model's process stopped ({exc})") from exc
                    continue
                except (KeyError, TypeError, ValueError) as exc:
                    _stop(proc)
                    self._proc = None
                    raise self._error(f"the model's process gave no vectors ({exc})") from exc
                return np.frombuffer(body, dtype="<f4").reshape(rows, dim).astype(np.float32)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        """End the child: its whole memory goes back to the system."""
        with self._lock:
            proc, self._proc = self._proc, None
        if proc is not None:
            _stop(proc)

    def __del__(self) -> None:
        proc = getattr(self, "_proc", None)
        if proc is not None:
            _stop(proc)


class _Gone(Exception):
    """The child's pipe broke under a request: it died."""


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """Close the child's input (it exits at end of input) and reap it; kill it if it
    does not go."""
    for stream in (proc.stdin, proc.stdout):
        try:
            if stream is not None:
                stream.close()
        except OSError:
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
