"""What the service tells the rest of the process: seed 000's ``MemoryCapturedEvent``
on an in-process bus (MediatR's notifications). The watcher and the tray subscribe."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from lexmem.models import MemorySource

__all__ = ["EventBus", "MemoryCaptured"]

# The service's logger: a failing subscriber is a capture problem, and lexmem.log says so.
log = logging.getLogger("lexmem.capture")


@dataclass(frozen=True, slots=True)
class MemoryCaptured:
    """Seed 000 §6 ``MemoryCapturedEvent``: what was captured, from where."""

    session_id: str | None
    source: MemorySource
    memory_ids: tuple[str, ...]


class EventBus:
    """In-process publish/subscribe (seed 000's MediatR notifications)."""

    def __init__(self) -> None:
        self._subs: list[Callable[[MemoryCaptured], None]] = []

    def subscribe(self, callback: Callable[[MemoryCaptured], None]) -> None:
        self._subs.append(callback)

    def publish(self, event: MemoryCaptured) -> None:
        for callback in list(self._subs):
            try:
                callback(event)
            except Exception:
                log.exception("a MemoryCaptured subscriber failed")
