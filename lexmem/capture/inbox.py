"""The inbox: the one write channel into lexmem (standard library only).

Every producer — the agent hook, the CLI, the MCP server, the tray, the Markdown
watcher — writes events here; only the service reads them and writes the store.
An event is one JSON file, written under a temporary name, flushed, synced and
renamed into place, so it is either wholly there or absent. The folder is 0700
and each file 0600: the file system is the access control (there is no socket).

Events follow seed 003's contract (session_id, event_id, event_type, timestamp,
content, metadata) extended with the agent, the project and the working folder, and,
for a conversation turn, its speaker (who said it: the person, or the agent by name;
optional, and absent from events written before it existed).
Producers redact before they write: nothing here ever sees a raw secret.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

from ..base import Frozen, atomic_write
from ..errors import InvalidInputError
from .stamps import new_event_id, now_iso

# The hook imports this module: no ``typing``, ``uuid`` (it pulls in ``platform``),
# ``datetime``, ``contextlib`` or ``dataclasses`` at import time, and no pattern compiled
# here; each costs the agent milliseconds on every hook call. What only the service's
# reading side needs is imported where it is used.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator, Mapping
    from typing import Any, NotRequired, TypedDict

    class InboxEvent(TypedDict):
        """One inbox event, as :func:`make_event` makes it and :func:`validate_event`
        returns it (which fills in ``content``, ``metadata`` and ``agent`` when absent).
        A producer may send more fields (the generic hook keeps them); none is read."""

        v: NotRequired[int]  # EVENT_VERSION; make_event always writes it
        event_id: str  # a UUID, canonical form
        session_id: str
        event_type: str  # one of EVENT_TYPES
        timestamp: str  # ISO 8601, with a time zone
        agent: str
        content: str
        metadata: dict[str, Any]
        project: NotRequired[str | None]
        cwd: NotRequired[str | None]
        speaker: NotRequired[str | None]  # who said a conversation turn (prompt, response)
        _seq: NotRequired[str]  # the writer's: the inbox file's name, for the window's order
else:
    # Declared for type checkers only: ``typing`` would cost the hook ~3 ms at import.
    InboxEvent = dict

__all__ = [
    "EVENT_TYPES",
    "EVENT_VERSION",
    "BadEvent",
    "Inbox",
    "InboxEvent",
    "derived_id",
    "make_event",
    "new_event_id",
    "now_iso",
    "queue_access",
    "queued_access",
    "validate_event",
]

EVENT_VERSION = 1
EVENT_TYPES = frozenset(
    {
        "prompt", "response", "tool_call", "tool_result",          # seed 003
        "session_start", "session_end", "stop", "compact",         # agent lifecycle
        "explicit", "config_change", "search_confirmation",        # seed 000 capture points
        "correction", "memory_op", "show_app",                     # user actions from CLI/MCP/tray
        "probe",                                                   # `lexmem doctor`: recorded only
    }
)  # fmt: skip
_NAME = r"^\d{20}-[0-9a-f-]{36}\.json$"  # compiled by the first read (``re`` caches it)
_MAX_FILE_BYTES = 64 * 1024 * 1024


class BadEvent(InvalidInputError, ValueError):
    """An inbox file that is not a valid event; ``reason`` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def make_event(
    event_type: str,
    content: str = "",
    *,
    session_id: str | None = None,
    agent: str = "lexmem",
    project: str | None = None,
    cwd: str | None = None,
    metadata: Mapping[str, Any] | None = None,
    event_id: str | None = None,
    timestamp: str | None = None,
    speaker: str | None = None,
) -> InboxEvent:
    """A well-formed event dictionary (not yet written); ``speaker`` only when given."""
    event: InboxEvent = {
        "v": EVENT_VERSION,
        "event_id": event_id or new_event_id(),
        "session_id": session_id or f"{agent}-adhoc",
        "event_type": event_type,
        "timestamp": timestamp or now_iso(),
        "agent": agent,
        "project": project,
        "cwd": cwd,
        "content": content,
        "metadata": dict(metadata or {}),
    }
    if speaker is not None:
        event["speaker"] = speaker
    return event


# lexmem's namespace for derived ids (version 5 UUIDs).
_DERIVED_NS = "5b0c5e1e-7c1a-4f0e-9d7e-6c657865d001"


def derived_id(*parts: str) -> str:
    """The id of what an event causes (a memory, an audit entry), derived from the event's
    id: processing the same event twice, after a crash, recreates nothing."""
    import uuid

    return str(uuid.uuid5(uuid.UUID(_DERIVED_NS), "\x1f".join(parts)))


def validate_event(data: Any) -> InboxEvent:
    """Check an event's shape; return it, or raise :class:`BadEvent` with the reason."""
    import uuid
    from datetime import datetime

    event: InboxEvent = data  # what the checks below let through
    if not isinstance(data, dict):
        raise BadEvent(f"an event must be a JSON object, not {type(data).__name__}")
    for key in ("event_id", "session_id", "event_type", "timestamp"):
        value = data.get(key)
        if not isinstance(value, str) or not value.strip():
            raise BadEvent(f"field {key!r} is missing or not a non-empty string")
    if data["event_type"] not in EVENT_TYPES:
        raise BadEvent(f"unknown event_type {data['event_type']!r}")
    try:
        # Canonical form: the file name carries the id, and names are checked on read.
        data["event_id"] = str(uuid.UUID(data["event_id"]))
    except ValueError as exc:
        raise BadEvent(f"event_id {data['event_id'][:40]!r} is not a UUID") from exc
    try:
        stamp = datetime.fromisoformat(data["timestamp"].replace("Z", "+00:00"))
    except ValueError as exc:
        raise BadEvent(f"timestamp {data['timestamp'][:40]!r} is not ISO 8601") from exc
    if stamp.tzinfo is None:
        raise BadEvent("timestamp has no time zone")
    if not isinstance(data.get("content", ""), str):
        raise BadEvent("field 'content' must be a string")
    if not isinstance(data.get("metadata", {}), dict):
        raise BadEvent("field 'metadata' must be an object")
    for key in ("project", "cwd", "agent", "speaker"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise BadEvent(f"field {key!r} must be a string or null")
    data.setdefault("content", "")
    data.setdefault("metadata", {})
    data.setdefault("agent", "generic")
    return event


class Inbox(Frozen):
    """The spool folder (``<data>/inbox``) and its quarantine.

    A frozen value class with one field, ``folder`` (:class:`~lexmem.base.Frozen`: like
    ``@dataclass(frozen=True, slots=True)``; importing ``dataclasses`` would cost the hook
    ~7 ms).
    """

    __slots__ = ("folder",)
    __match_args__ = ("folder",)

    folder: Path

    def __init__(self, folder: Path) -> None:
        super().__init__(folder)

    @property
    def quarantine(self) -> Path:
        return self.folder / "quarantine"

    def ensure(self) -> None:
        old = os.umask(0o077) if os.name == "posix" else None
        try:
            self.folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            self.quarantine.mkdir(mode=0o700, exist_ok=True)
        finally:
            if old is not None:
                os.umask(old)

    def write(self, event: InboxEvent) -> Path:
        """Write one event atomically; returns its final path. Raises OSError (e.g. ENOSPC)."""
        self.ensure()
        data = json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        # Names sort in arrival order: nanoseconds first, then the event id.
        name = f"{time.time_ns():020d}-{event['event_id']}.json"
        final = self.folder / name
        # The temporary name is hidden (no reader takes it for an event) and starts with
        # ".tmp-", which :meth:`sweep` knows.
        atomic_write(final, data, tmp_prefix=f".tmp-{event['event_id']}-")
        return final

    def pending(self) -> list[Path]:
        """Event files waiting, oldest first (temporary files are not events yet)."""
        try:
            names = sorted(
                n for n in os.listdir(self.folder) if n.endswith(".json") and not n.startswith(".")
            )
        except FileNotFoundError:
            return []
        return [self.folder / n for n in names]

    def sweep(self, older_than_s: float = 3600.0) -> int:
        """Remove temporary files a producer left when it died mid-write (a write takes
        milliseconds, so one this old is abandoned: it never became an event). Returns
        how many went."""
        now = time.time()
        gone = 0
        for folder in (self.folder, self.quarantine):
            try:
                names = [n for n in os.listdir(folder) if n.startswith(".tmp-")]
            except FileNotFoundError:
                continue
            for name in names:
                path = folder / name
                try:
                    if now - path.stat().st_mtime > older_than_s:
                        path.unlink()
                        gone += 1
                except FileNotFoundError:
                    continue
        return gone

    def __iter__(self) -> Iterator[Path]:
        return iter(self.pending())

    def read(self, path: Path) -> InboxEvent:
        """Parse and validate one event file; :class:`BadEvent` says what is wrong."""
        try:
            size = path.stat().st_size
        except FileNotFoundError as exc:
            raise FileNotFoundError(str(path)) from exc
        if size > _MAX_FILE_BYTES:
            raise BadEvent(f"event file is {size} bytes (more than {_MAX_FILE_BYTES})")
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise BadEvent(f"not UTF-8 (byte {exc.start})") from exc
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadEvent(
                f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
            ) from exc
        except RecursionError as exc:  # "[[[[…" a hundred thousand deep
            raise BadEvent("JSON nested too deeply") from exc
        except ValueError as exc:  # e.g. an integer of more than 4,300 digits
            raise BadEvent(f"not valid JSON ({exc})") from exc
        if not re.match(_NAME, path.name):
            raise BadEvent(f"unexpected file name {path.name[:60]!r}")
        if re.search(r"\\u[dD][89a-fA-F]", text):
            # A lone surrogate ("\ud800") is valid JSON but has no UTF-8 form: no table
            # could store it. It becomes U+FFFD; a well-formed pair stays as it is.
            clean = json.dumps(data, ensure_ascii=False).encode("utf-8", errors="surrogatepass")
            data = json.loads(clean.decode("utf-8", errors="replace"))
        return validate_event(data)

    def remove(self, path: Path) -> None:
        path.unlink(missing_ok=True)

    def quarantine_file(self, path: Path, reason: str, redact: Any = None) -> Path:
        """Move a bad event aside, rewritten through ``redact`` (text -> text) when given.

        Whatever reached the inbox malformed may hold anything; the quarantined copy
        is redacted so no secret sits in it.
        """
        self.ensure()
        target = self.quarantine / (
            path.name if path.name.endswith(".json") else path.name + ".json"
        )
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return target
        text = raw.decode("utf-8", errors="replace")
        if redact is not None:
            text = redact(text)
        body = json.dumps(
            {"reason": reason, "original_name": path.name, "content": text}, ensure_ascii=False
        ).encode("utf-8", errors="replace")
        # Written aside and renamed, as events are: a full disk leaves no half a copy
        # (the bad file stays in the inbox and is moved on the next drain).
        atomic_write(target, body, tmp_prefix=f".tmp-{target.name}-")
        self.remove(path)
        return target

    def quarantined(self) -> list[Path]:
        try:
            return sorted(p for p in self.quarantine.iterdir() if p.suffix == ".json")
        except FileNotFoundError:
            return []


# -- searches' access records -----------------------------------------------------------
#
# A search does not write the store: it leaves the ids it returned here, one small file
# per search (no sync: an access record lost to a power cut costs nothing), and the
# writer adds them up per memory and applies them in one commit per batch.


def queue_access(folder: Path, ids: list[str]) -> Path:
    """Queue one search's access records (the ids of its hits) for the writer."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    name = f"{time.time_ns():020d}-{os.getpid()}-{os.urandom(4).hex()}.json"
    # Not synced: an access record is a courtesy, and a search must not wait on the disk.
    atomic_write(folder / name, json.dumps([str(i) for i in ids]), durable=False)
    return folder / name


def queued_access(folder: Path) -> tuple[dict[str, int], list[Path]]:
    """The access records waiting: how many times each memory was returned, and the
    files they came from (to remove once applied). Unreadable files count for nothing."""
    counts: dict[str, int] = {}
    files: list[Path] = []
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json") and n[0] != ".")
    except FileNotFoundError:
        return counts, files
    for name in names:
        path = folder / name
        files.append(path)
        try:
            ids = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(ids, list):
            for i in ids:
                if isinstance(i, str):
                    counts[i] = counts.get(i, 0) + 1
    return counts, files
