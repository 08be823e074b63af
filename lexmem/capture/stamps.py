"""An event's id and time, with ``os`` and ``time`` only: the relay stamps each hook call
as it arrives, before it has imported the inbox (:mod:`lexmem.capture.inbox` re-exports
both)."""

from __future__ import annotations

import os
import time

__all__ = ["new_event_id", "now_iso", "process_started"]


def now_iso(at: float | None = None) -> str:
    """The current time (or ``at``, seconds since the epoch) as
    ``datetime.now(UTC).isoformat()`` writes it, without ``datetime``.

    ``2025-01-31T09:05:03.123456+00:00``; the fraction is left out when it is zero.
    """
    micros_total = time.time_ns() // 1000 if at is None else round(at * 1_000_000)
    seconds, micros = divmod(micros_total, 1_000_000)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
    return f"{stamp}.{micros:06d}+00:00" if micros else f"{stamp}+00:00"


def new_event_id() -> str:
    """A random (version 4) UUID in canonical form, as ``str(uuid.uuid4())`` makes it."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40  # version 4
    b[8] = (b[8] & 0x3F) | 0x80  # RFC 4122 variant
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def process_started() -> float | None:
    """When the agent started this process (seconds since the epoch; Linux, to the clock
    tick), or ``None`` (now) where that cannot be read.

    The agent's moment, not the interpreter's, which comes 20 to 100 ms later on a busy
    machine: an event written late (a hook the agent did not wait for, SessionStart's
    capture behind the digest) is put back in the agent's order by it.
    """
    try:
        with open("/proc/self/stat", "rb") as f:
            stat_line = f.read()
        ticks = int(stat_line[stat_line.rindex(b")") + 2 :].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return None
    return time.time() - age if 0 <= age < 60 else None
