"""The service's loop is woken by an event file arriving in the inbox, and by nothing else
the inbox sees: each write is several notices (the hidden temporary file made, written,
closed, renamed) and the drain's own removals are more, and each woken turn of the loop
costs the machine while an agent works beside it. The real watchdog observer on a real
inbox; waits have hard timeouts far above normal."""

from __future__ import annotations

import threading
from pathlib import Path

from faultkit import wait_for

from lexmem.api import Lexmem
from lexmem.base import atomic_write
from lexmem.service.writer import CaptureService

HANG = 60.0  # a hang detector, far above normal


def test_only_an_arriving_event_file_wakes_the_loop(lm: Lexmem) -> None:
    service = CaptureService(lm)
    woken: list[int] = []
    lock = threading.Lock()

    def wake() -> None:
        with lock:
            woken.append(1)

    service.wake = wake  # type: ignore[method-assign]
    service.inbox.ensure()
    observer = service._watch()
    assert observer is not None
    try:
        folder = service.inbox.folder
        atomic_write(folder / "0001-first.json", b"{}", tmp_prefix=".tmp-first-")
        wait_for(lambda: woken, "a wake for the first event file", HANG)
        with lock:
            woken.clear()
        # What must not wake it: a producer's temporary file, written and removed; the
        # drain's removal of an event file; a change to one already there.
        tmp = folder / ".tmp-second-abc"
        tmp.write_bytes(b"{}")
        tmp.unlink()
        (folder / "0001-first.json").unlink()
        (folder / "notes.txt").write_text("not an event")
        # The sentinel: notices are handled in order, so once it has woken the loop, all
        # of the above have been seen.
        atomic_write(folder / "0002-second.json", b"{}", tmp_prefix=".tmp-second-")
        wait_for(lambda: woken, "a wake for the second event file", HANG)
        with lock:
            count = len(woken)
        assert count == 1  # the sentinel's rename alone
        # Written directly (another writer, no rename): made, then closed; it wakes too.
        with lock:
            woken.clear()
        Path(folder / "0003-third.json").write_bytes(b"{}")
        wait_for(lambda: woken, "a wake for an event file written in place", HANG)
    finally:
        observer.stop()
        observer.join(timeout=5)


def test_the_notices_of_one_write_wake_the_loop_once(lm: Lexmem) -> None:
    """Twenty event files written and removed one after another: one wake each, not one
    for each of the six or seven notices a write and its removal make."""
    service = CaptureService(lm)
    woken: list[int] = []
    service.wake = lambda: woken.append(1)  # type: ignore[method-assign]
    service.inbox.ensure()
    observer = service._watch()
    assert observer is not None
    try:
        for n in range(20):
            atomic_write(service.inbox.folder / f"{n:04d}-e.json", b"{}", tmp_prefix=".tmp-e-")
            (service.inbox.folder / f"{n:04d}-e.json").unlink()  # as the drain removes it
        wait_for(lambda: len(woken) >= 20, "a wake for each of the twenty", HANG)
        atomic_write(service.inbox.folder / "9999-last.json", b"{}", tmp_prefix=".tmp-last-")
        wait_for(lambda: len(woken) >= 21, "the last wake", HANG)
        assert len(woken) == 21
    finally:
        observer.stop()
        observer.join(timeout=5)
