"""The one background runner of the app (STYLE.md 4).

Writes run one at a time on their own thread; reads (search, lists, statistics,
model work) run on a small pool beside it. Results and errors come back to the Qt
event loop through a queued signal, so callbacks may touch widgets and workers never do.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from PySide6.QtCore import QObject, Qt, Signal, Slot

__all__ = ["Runner"]

log = logging.getLogger("lexmem.ui")


class Runner(QObject):
    """Run callables off the UI thread; call back on it."""

    _deliver = Signal(object)
    #: Emitted on the UI thread when a task raised and had no ``on_error`` of its own.
    failed = Signal(object)
    #: Emitted on the UI thread whenever the number of running tasks changes.
    busy_changed = Signal(int)

    def __init__(self, parent: QObject | None = None, *, readers: int = 2) -> None:
        super().__init__(parent)
        self._writes = ThreadPoolExecutor(1, thread_name_prefix="lexmem-write")
        self._reads = ThreadPoolExecutor(readers, thread_name_prefix="lexmem-read")
        self._pending = 0
        self._lock = threading.Lock()
        self._closed = False
        self._deliver.connect(self._on_deliver, Qt.ConnectionType.QueuedConnection)

    @property
    def pending(self) -> int:
        """Tasks submitted whose callbacks have not run yet."""
        return self._pending

    def run(
        self,
        fn: Callable[[], Any],
        *,
        on_done: Callable[[Any], None] | None = None,
        on_error: Callable[[BaseException], None] | None = None,
        write: bool = False,
    ) -> Future[Any]:
        """Run ``fn`` on the write thread (``write=True``) or the read pool."""
        if self._closed:
            # A late signal after the app began to quit: nobody is left to see the result.
            log.debug("task submitted after shutdown, dropped")
            dropped: Future[Any] = Future()
            dropped.cancel()
            return dropped
        pool = self._writes if write else self._reads
        self._pending += 1
        self.busy_changed.emit(self._pending)

        def task() -> Any:
            try:
                result = fn()
            except Exception as exc:
                log.debug("background task failed", exc_info=True)
                error = exc
                self._emit(lambda: self._finish(None, error, on_done, on_error))
                raise
            self._emit(lambda: self._finish(result, None, on_done, on_error))
            return result

        return pool.submit(task)

    def _emit(self, callback: Callable[[], None]) -> None:
        # RuntimeError: the runner's QObject is gone (the app quitting), nobody to tell.
        with contextlib.suppress(RuntimeError):
            self._deliver.emit(callback)

    def _finish(
        self,
        result: Any,
        error: BaseException | None,
        on_done: Callable[[Any], None] | None,
        on_error: Callable[[BaseException], None] | None,
    ) -> None:
        self._pending -= 1
        self.busy_changed.emit(self._pending)
        if error is not None:
            if on_error is not None:
                on_error(error)
            else:
                self.failed.emit(error)
        elif on_done is not None:
            on_done(result)

    @Slot(object)
    def _on_deliver(self, callback: Callable[[], None]) -> None:
        callback()

    def shutdown(self, wait: bool = True) -> None:
        self._closed = True
        self._writes.shutdown(wait=wait, cancel_futures=not wait)
        self._reads.shutdown(wait=wait, cancel_futures=not wait)
