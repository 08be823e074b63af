"""The capture pipeline: how an inbox event becomes a memory.

    inbox/ ──► read (bad → quarantine) ──► seen before? drop ──► sessions
          ──► direct events (explicit, configuration, confirmation, correction)
          ──► window buffer ──► at a boundary: extract → policy → dedupe → encode → store
          ──► audit every candidate; remove the event file only after its effects committed

``CapturePipeline`` holds these steps (``_batch`` and what it calls) and seed 000's
``capture_*`` calls. ``CaptureService`` (:mod:`lexmem.service.writer`) is this pipeline
with what runs it: the service lock, the loop that drains the inbox, the maintenance jobs.

Crash safety: an event file is removed only after the journal recorded it; every
effect carries a deterministic id (memory ids and audit ids derive from event ids),
so re-running a batch after a crash recreates nothing that already exists.

Faults: what one event gets wrong is that event's alone: a file that cannot be read is
quarantined; a window whose extraction fails is let go with an audit entry. What the
machine gets wrong (:func:`environmental`) is raised to the writer, and the events stay
in the inbox.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from lexmem.capture.extract import Candidate, CandidateKind, Extractor, confirmations
from lexmem.capture.extract.thresholds import MODE_THRESHOLDS
from lexmem.capture.inbox import BadEvent, Inbox, derived_id
from lexmem.capture.policy import (
    DROPPED,
    capture_mode,
    opted_out_event,
    optout_rules,
    project_opted_out,
)
from lexmem.capture.redact import redact, redact_obj
from lexmem.config import CaptureRules
from lexmem.errors import (
    ConfigError,
    DataFolderError,
    InvalidInputError,
    LexmemError,
    ModelError,
    NotFoundError,
    StoreDamagedError,
    StoreError,
    io_failure,
)
from lexmem.licence import CAPTURE, CORE_ACTIVE_LIMIT, STORAGE
from lexmem.llm import LlmError
from lexmem.models import (
    Memory,
    MemoryContext,
    MemoryLink,
    MemorySource,
    fingerprint,
    make_title,
    utcnow,
)
from lexmem.service.digest import DigestKeeper
from lexmem.service.events import EventBus, MemoryCaptured
from lexmem.service.ops import apply_op, particulars_key, particulars_of
from lexmem.store.journal import AuditEntry, Session, SessionStatus
from lexmem.store.protocol import MemoryFilter

if TYPE_CHECKING:
    from lexmem.api import Lexmem
    from lexmem.capture.inbox import InboxEvent
    from lexmem.llm import LlmClient


__all__ = [
    "MAINTENANCE",
    "CapturePipeline",
    "DrainReport",
    "agent_order",
    "environmental",
    "redacted_event",
]

log = logging.getLogger("lexmem.capture")


def redacted_event(event: InboxEvent) -> InboxEvent:
    """The event with its content and metadata redacted again. Producers redact before
    they write, but any program that can write the inbox is a producer: the service,
    the one writer of the store, does not take their word for it. Every field is
    redacted -- the project and the working folder are names a person typed too --
    except ids, types and times (memory ids derive from event ids)."""
    for key, value in event.items():
        if key not in _EVENT_IDS:
            event[key] = redact_obj(value)[0]  # type: ignore[literal-required]
    return event


_EVENT_IDS = frozenset(("v", "event_id", "session_id", "event_type", "timestamp", "agent"))


DEDUPE_WINDOW = timedelta(days=30)
NEAR_DUPLICATE = {"assist": 0.90, "full": 0.86}  # full mode dedupes more strictly
REJECTED_NEAR = 0.92  # as close as this to a rejected memory: the same candidate again
WINDOWED = {
    "prompt",
    "response",
    "tool_call",
    "tool_result",
    "session_start",
    "stop",
    "compact",
    "session_end",
}
BOUNDARY = {"response", "stop", "session_end", "compact"}
# What the capture gate covers: everything lexmem learns without being asked.
AUTOMATIC = WINDOWED | {"config_change", "correction"}
MAX_BUFFER = 60

# The whole-store jobs the writer runs for other callers, alone: nothing else is written
# while one runs (memory_op events with these ops, or handed over in-process).
MAINTENANCE = ("import", "reembed", "optimize", "scan_notes", "team_sync")


def environmental(exc: BaseException) -> bool:
    """A failure of the machine or the set-up (disk, model, store, settings), not of the
    event being processed: retried later, never a reason to quarantine anything."""
    if isinstance(exc, (ModelError, DataFolderError, ConfigError)):
        return True
    # A damaged table is no more the machine's than it was before the store named it.
    if isinstance(exc, StoreError) and not isinstance(exc, (NotFoundError, StoreDamagedError)):
        return True
    return io_failure(exc) is not None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0][:300]}" if text else type(exc).__name__


# An event of these kinds may need the embedding model on the way in (memory operations
# only when they edit or replace text).
_MODEL_FREE = frozenset({"probe", "show_app", "search_confirmation", "memory_op"})
_MODEL_OPS = frozenset({"edit", "supersede"})


def agent_order(events: Sequence[Any]) -> list[Any]:
    """A session's events in the order the agent made them: by their time, arrival order
    among equal times (and for a time that cannot be read).

    Events arrive in the order they were written, which need not be the agent's: a hook
    the agent does not wait for (Claude Code's ``async`` command hooks) writes its event
    after a later one's, and hook processes started one after another finish in any
    order. Each event carries the time it was made (a hook's, or the service's on taking
    a hook call), which is the agent's order.
    """

    def when(item: tuple[int, Any]) -> tuple[datetime, int]:
        i, event = item
        try:
            stamp = _parse(str(event.get("timestamp")))
        except (TypeError, ValueError):
            stamp = None
        if stamp is None or stamp.tzinfo is None:
            return datetime.max.replace(tzinfo=UTC), i
        return stamp, i

    return [e for _, e in sorted(enumerate(events), key=when)]


def _needs_model(event: InboxEvent) -> bool:
    if event["event_type"] not in _MODEL_FREE:
        return True
    op = (event.get("metadata") or {}).get("op")
    return event["event_type"] == "memory_op" and isinstance(op, str) and op in _MODEL_OPS


@dataclass(slots=True)
class DrainReport:
    events: int = 0
    duplicates: int = 0
    quarantined: int = 0
    saved: int = 0
    skipped: int = 0
    reinforced: int = 0
    sessions_closed: int = 0
    memory_ids: list[str] = field(default_factory=list)

    def add(self, other: DrainReport) -> None:
        for name in (
            "events",
            "duplicates",
            "quarantined",
            "saved",
            "skipped",
            "reinforced",
            "sessions_closed",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.memory_ids.extend(other.memory_ids)

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


class CapturePipeline:
    """Events into memories: read, gate, window, extract, admit, encode, store, audit.
    ``CaptureService`` runs it; it holds the state the steps share."""

    #: A whole-store job (:data:`MAINTENANCE`) asked for as an event, ``(event_id, op,
    #: kwargs, audit entry)``: the writer runs it alone (``CaptureService._maintenance_op``).
    _maintenance_op: Callable[[str, str, dict[str, Any], AuditEntry], None]

    def __init__(self, lm: Lexmem, *, extractor: Extractor | None = None) -> None:
        self.lm = lm
        self.settings = lm.settings.capture
        self.journal = lm.journal
        self.inbox = Inbox(lm.paths.inbox)
        self.extractor = extractor or Extractor()
        self.bus = EventBus()
        self.metrics: Counter[str] = Counter()
        # Called (on the service's thread) when a second launch asks the app to show itself.
        self.on_show: Callable[[], None] | None = None
        self._rejected: list[dict[str, Any]] | None = None
        # The projects' context digests, rewritten after changes (the hook only reads them).
        self.digests = DigestKeeper(lm)

    def _batch(self, files: Sequence[Any]) -> DrainReport:
        report = DrainReport()
        self._rejected = None  # reviews recorded since the last batch apply from this one on
        parsed: list[tuple[Any, InboxEvent]] = []
        for path in files:
            try:
                parsed.append((path, redacted_event(self.inbox.read(path))))
            except FileNotFoundError:
                continue
            except BadEvent as exc:
                self._quarantine(path, exc.reason)
                report.quarantined += 1
        parsed, dropped = self._drop_opted_out(parsed)
        report.skipped += dropped
        if not parsed:
            return report
        seen = self.journal.seen([e["event_id"] for _, e in parsed])
        fresh: list[InboxEvent] = []
        ids: set[str] = set()
        for path, event in parsed:
            if event["event_id"] in seen or event["event_id"] in ids:
                report.duplicates += 1
                continue
            ids.add(event["event_id"])
            event["_seq"] = f"{path.name}"
            fresh.append(event)
        report.events += len(fresh)
        fresh, unseen_ends = self._unseen_ends(fresh)
        self._audit_dropped(fresh)
        if any(_needs_model(e) for e in fresh):
            # A missing or broken model stops the batch here, before anything is written:
            # every event stays queued (nothing half-done to repeat on the retry).
            self.lm.embedder.load()
        gated = self._gate(fresh)
        if gated:
            fresh = [e for e in fresh if e["event_type"] not in AUTOMATIC]
            report.skipped += len(gated)
        report.add(self._explicit([e for e in fresh if e["event_type"] == "explicit"]))
        for event in fresh:
            if event["event_type"] not in WINDOWED and event["event_type"] != "explicit":
                report.add(self._direct(event))
        # Sessions count events: saved after the steps that can fail, so a retry counts once.
        touched = self._sessions(fresh)
        for _, event in parsed:
            # Taken in before a crash: its window may not have been extracted yet (a
            # session end of a session never seen has none).
            if (
                event["event_id"] in seen
                and event["event_type"] in WINDOWED
                and self.journal.session(event["session_id"]) is not None
            ):
                touched.setdefault(event["session_id"], set()).add(event["event_type"])
        buffered = [e for e in fresh if e["event_type"] in WINDOWED]
        self.journal.take_in([*fresh, *gated, *unseen_ends], buffered)
        for path, _ in parsed:
            self.inbox.remove(path)
        for session_id, types in touched.items():
            final = "session_end" in types
            if final or types & BOUNDARY or len(self.journal.buffered(session_id)) >= MAX_BUFFER:
                report.add(self._window_or_let_go(session_id, final=final))
        self.metrics["events"] += report.events
        if any(e["event_type"] == "memory_op" for e in fresh):
            self.digests.mark_all()  # an op names a memory by id, not its project
        elif report.saved or report.reinforced:
            self.digests.mark(e.get("project") for e in fresh)
        return report

    def _unseen_ends(self, events: list[InboxEvent]) -> tuple[list[InboxEvent], list[InboxEvent]]:
        """(the events to handle, the session ends to only mark processed): a session end
        for a session lexmem never saw -- no session row, nothing else of it in this batch --
        ends nothing. Claude Code fires SessionEnd alone for a command that starts no
        session (``claude mcp list``); it would otherwise leave a completed empty session."""
        others = {e["session_id"] for e in events if e["event_type"] != "session_end"}
        ends = [
            e for e in events if e["event_type"] == "session_end" and e["session_id"] not in others
        ]
        unseen = {e["session_id"] for e in ends if self.journal.session(e["session_id"]) is None}
        if not unseen:
            return events, []
        log.info("[MEM:CAPTURE] Skipped %d session ends of sessions never seen", len(unseen))
        return (
            [
                e
                for e in events
                if e["event_type"] != "session_end" or e["session_id"] not in unseen
            ],
            [e for e in events if e["event_type"] == "session_end" and e["session_id"] in unseen],
        )

    # -- opt-out, asked again at drain time ------------------------------------------

    def optout_rules(self) -> CaptureRules:
        """The opt-outs as they stand now: the settings file, which another process
        (``lexmem optout add``, the tray) may have changed since this service started,
        and this process's own settings. Unreadable settings raise :class:`ConfigError`:
        the events then wait in the inbox until the opt-outs can be known."""
        return optout_rules(self.lm.paths, self.settings)

    def _drop_opted_out(
        self, parsed: list[tuple[Any, InboxEvent]]
    ) -> tuple[list[tuple[Any, InboxEvent]], int]:
        """Events of a repository opted out since they were queued (or a tool call on a
        file inside one) leave nothing: no memory, buffer row, session or digest line;
        their files go, and the audit says how many, never what or where."""
        rules = self.optout_rules()
        keep: list[tuple[Any, InboxEvent]] = []
        gone: list[tuple[Any, InboxEvent]] = []
        for item in parsed:
            (gone if opted_out_event(item[1], rules) else keep).append(item)
        if gone:
            self._audit_opted_out([e for _, e in gone])
            for path, _ in gone:
                self.inbox.remove(path)
            # A digest written before the opt-out goes at the next flush.
            self.digests.mark(e.get("project") for _, e in gone if e.get("project"))
        return keep, len(gone)

    def _audit_opted_out(self, events: Sequence[Mapping[str, Any]]) -> None:
        """One audit entry for the events of opted-out repositories let go together: the
        decision and its reason, how many, and nothing of where they came from (no
        session, project or path; its id derives from the events' ids alone)."""
        if not events:
            return
        ident = derived_id("optout", *sorted(e["event_id"] for e in events))
        self.journal.audit([
            AuditEntry(
                id=ident, timestamp=utcnow(), session_id=None, candidate_id=ident,
                decision="skipped", reason="opted out", confidence=0.0, rule="optout",
                kind="optout", metadata={"events": len(events)},
            )
        ])  # fmt: skip
        log.info("[MEM:CAPTURE] Dropped %d events of opted-out repositories", len(events))

    def _gate(self, events: Sequence[InboxEvent]) -> list[InboxEvent]:
        """The capture gate, asked once per batch: under Core, automatic events are
        skipped, with one audit entry per session rather than one per event."""
        automatic = [e for e in events if e["event_type"] in AUTOMATIC]
        if not automatic or self.lm.licence.is_enabled(CAPTURE):
            return []
        entries = {}
        for e in automatic:
            sid = e["session_id"]
            entries[sid] = AuditEntry(
                id=derived_id("gate", CAPTURE, sid), timestamp=utcnow(), session_id=sid,
                candidate_id=sid, decision="skipped", reason="automatic capture needs Writer Pro",
                confidence=0.0, rule=CAPTURE, kind="licence", project=e.get("project"),
            )  # fmt: skip
        known = {i for i in entries if self.journal.audit_entry(derived_id("gate", CAPTURE, i))}
        self.journal.audit([a for sid, a in entries.items() if sid not in known])
        return automatic

    def _audit_dropped(self, events: Sequence[InboxEvent]) -> None:
        """Events whose content the hook could not check for secrets in time, and so never
        wrote (``metadata.dropped``): the audit says what was lost, and why."""
        self.journal.audit([
            AuditEntry(
                id=derived_id("dropped", e["event_id"]), timestamp=utcnow(), session_id=e["session_id"],
                candidate_id=e["event_id"], decision="skipped", confidence=0.0, rule="hook.budget",
                kind="event", project=e.get("project"),
                reason=f"{e['event_type']} event {DROPPED} for secrets: its content was dropped",
            )
            for e in events
            if isinstance(e.get("metadata"), dict) and e["metadata"].get("dropped") == DROPPED
        ])  # fmt: skip

    def _quarantine(self, path: Any, reason: str) -> None:
        reason = redact(reason).text  # a reason may quote a field of the bad file
        target = self.inbox.quarantine_file(path, reason, redact=lambda t: redact(t).text)
        self.journal.audit(
            [AuditEntry(
                id=derived_id("quarantine", path.name), timestamp=utcnow(), session_id=None,
                candidate_id=path.name, decision="quarantined", reason=reason, confidence=0.0,
                rule="inbox.validate", metadata={"file": target.name},
            )]
        )  # fmt: skip
        log.warning("[MEM:CAPTURE] Quarantined %s: %s", path.name, reason)

    def _sessions(self, events: Sequence[InboxEvent]) -> dict[str, set[str]]:
        """Start, touch and end sessions (seed 002 SessionManager); returns types seen per session."""
        touched: dict[str, set[str]] = {}
        changed: dict[str, Session] = {}
        for e in events:
            if e["event_type"] not in WINDOWED:
                continue
            sid = e["session_id"]
            touched.setdefault(sid, set()).add(e["event_type"])
            when = _parse(e["timestamp"])
            s = changed.get(sid) or self.journal.session(sid)
            if s is None:
                s = Session(sid, e.get("agent") or "", e.get("project"), when, when)
            s.last_event_at = max(s.last_event_at, when)
            s.event_count += 1
            s.project = s.project or e.get("project")
            if (
                e["event_type"] == "session_start"
                and s.status != SessionStatus.ACTIVE
                and s.ended_at is None
            ):
                s.status = SessionStatus.ACTIVE
            if e["event_type"] == "session_end" and s.status == SessionStatus.ACTIVE:
                s.status, s.ended_at = SessionStatus.COMPLETED, when  # idempotent: ends once
            changed[sid] = s
        self.journal.save_sessions(list(changed.values()))
        return touched

    # -- direct events ----------------------------------------------------------------

    def _direct(self, event: InboxEvent) -> DrainReport:
        kind = event["event_type"]
        meta = event.get("metadata") or {}
        if kind == "search_confirmation":
            report = DrainReport()
            for memory_id, _query in confirmations([event]):
                if self.lm.store.get_optional(memory_id, with_embedding=False) is not None:
                    self.lm.store.reinforce(memory_id, 0.1)
                    report.reinforced += 1
            return report
        if kind == "memory_op":
            return self._memory_op(event)
        if kind == "show_app":
            if self.on_show is not None:
                self.on_show()
            return DrainReport()
        if kind == "config_change":
            cand = self.extractor.configuration(
                str(meta.get("key", "")), meta.get("old"), meta.get("new"),
                session_id=event["session_id"], project=event.get("project"), event_ids=(event["event_id"],),
            )  # fmt: skip
            return self._admit([cand], event["session_id"], event.get("project"))
        if kind == "correction":
            original = str(meta.get("original", ""))
            corrected = str(meta.get("corrected", event.get("content", "")))
            context = str(meta.get("context", ""))
            cand_or_none = self.extractor.correction(
                original, corrected, context, session_id=event["session_id"],
                project=event.get("project"), event_ids=(event["event_id"],),
            )  # fmt: skip
            if cand_or_none is not None:
                cand_or_none = self._improve_correction(
                    cand_or_none, original, corrected, context, event.get("project")
                )
            return self._admit(
                [cand_or_none] if cand_or_none else [], event["session_id"], event.get("project")
            )
        return DrainReport()

    def _explicit(self, events: Sequence[InboxEvent]) -> DrainReport:
        """ "Remember this" from the CLI, MCP or tray: always kept, one memory per event id.

        A batch's explicit events are encoded together (the model is the cost).
        """
        from lexmem.encoder import EncodingRequest
        from lexmem.models import MemoryType

        report = DrainReport()
        store = self.lm.store
        done = store.existing_ids([derived_id("explicit", e["event_id"]) for e in events])
        empty = [e for e in events if not (e.get("content") or "").strip()]
        todo = [
            e for e in events
            if (e.get("content") or "").strip() and derived_id("explicit", e["event_id"]) not in done
        ]  # fmt: skip
        self._audit_explicit_done(
            [e for e in events if derived_id("explicit", e["event_id"]) in done]
        )
        if empty:  # written by hand or by a broken client: said, never silently dropped
            self.journal.audit([AuditEntry(
                id=derived_id("audit", derived_id("explicit", e["event_id"])), timestamp=utcnow(),
                session_id=e["session_id"], candidate_id=derived_id("explicit", e["event_id"]),
                decision="skipped", reason="nothing to remember: the text is empty", confidence=1.0,
                rule="explicit", kind="explicit", project=e.get("project"),
            ) for e in empty])  # fmt: skip
            report.skipped += len(empty)
        if not todo:
            return report
        todo, over = self._storage_gate(todo)
        report.skipped += len(over)
        if not todo:
            return report
        requests = []
        # A typed name means the project that goes by it ("shop": the known ~/work/shop),
        # as when the core remembers directly (lexmem.projects).
        known = self.lm.projects() if any(e.get("project") for e in todo) else []
        for e in todo:
            meta = e.get("metadata") or {}
            # Any program can write the inbox: a title or type that is not text is ignored.
            title, kind = (
                v if isinstance(v, str) else None for v in (meta.get("title"), meta.get("type"))
            )
            typed = e.get("project")
            ctx = MemoryContext(
                source=MemorySource.EXPLICIT, session_id=e["session_id"],
                project=self.lm.project_meant(typed, known) if typed else None,
                title=title, pinned=bool(meta.get("pin")), user_id=self.lm.settings.store.user_id,
                learning_context=f"remembered through {e.get('agent') or 'lexmem'}",
            )  # fmt: skip
            mtype = MemoryType(kind) if kind in {t.value for t in MemoryType} else None
            requests.append(EncodingRequest(e["content"], ctx, mtype))
        memories: list[Memory] = []
        audit: list[AuditEntry] = []
        for e, group in zip(todo, self._encode_groups(requests), strict=True):
            first = group[0]
            memory_id = derived_id("explicit", e["event_id"])
            for i, m in enumerate(group):
                m.id = memory_id if i == 0 else derived_id("explicit", e["event_id"], str(i))
            memories.extend(group)
            audit.append(AuditEntry(
                id=derived_id("audit", memory_id), timestamp=utcnow(), session_id=e["session_id"],
                candidate_id=memory_id, decision="saved", reason="explicit", confidence=1.0,
                rule="explicit", kind="explicit", memory_id=memory_id, title=first.title,
                project=e.get("project"),
                metadata={"llm_notes": first.metadata["llm_notes"]} if first.metadata.get("llm_notes") else {},
            ))  # fmt: skip
        store.store_many(memories)
        for prev, nxt in itertools.pairwise(memories):
            if nxt.chunk and nxt.chunk.chunk_index > 0:  # chunks of one long text, in order
                store.store_link(MemoryLink(nxt.id, prev.id, "continues", 1.0))
        self.journal.audit(audit)
        report.saved += len(memories)
        report.memory_ids.extend(m.id for m in memories)
        self.bus.publish(MemoryCaptured(None, MemorySource.EXPLICIT, tuple(report.memory_ids)))
        return report

    def _audit_explicit_done(self, events: Sequence[InboxEvent]) -> None:
        """Memories stored before a crash that came before their audit entry: the entry
        now (the audit write keeps an entry that exists as it is)."""
        if not events:
            return
        ids = [derived_id("explicit", e["event_id"]) for e in events]
        titles = {m.id: m.title for m in self.lm.store.get_many(ids)}
        self.journal.audit([AuditEntry(
            id=derived_id("audit", mid), timestamp=utcnow(), session_id=e["session_id"],
            candidate_id=mid, decision="saved", reason="explicit", confidence=1.0, rule="explicit",
            kind="explicit", memory_id=mid, title=titles.get(mid, ""), project=e.get("project"),
        ) for e, mid in zip(events, ids, strict=True)])  # fmt: skip

    def _storage_gate(self, events: list[InboxEvent]) -> tuple[list[InboxEvent], list[InboxEvent]]:
        """Core keeps up to 1,000 active memories: the rest are set aside, their text kept
        in the audit log so they can be remembered once there is room."""
        from lexmem.licence import LicenceRequiredError

        try:
            self.lm.check_storage(len(events))
            return events, []
        except LicenceRequiredError as exc:
            reason = str(exc)
        room = max(0, CORE_ACTIVE_LIMIT - self.lm.store.count(MemoryFilter()))
        kept, over = events[:room], events[room:]
        self.journal.audit([
            AuditEntry(
                id=derived_id("audit", derived_id("explicit", e["event_id"])), timestamp=utcnow(),
                session_id=e["session_id"], candidate_id=derived_id("explicit", e["event_id"]),
                decision="skipped", reason=reason, confidence=1.0, rule=STORAGE, kind="explicit",
                project=e.get("project"), text=e.get("content"),
            )
            for e in over
        ])  # fmt: skip
        return kept, over

    def _memory_op(self, event: InboxEvent) -> DrainReport:
        """A change a client asked for (pin, archive, edit, …), applied by the single writer.

        The outcome goes to the audit log under an id derived from the event, where the
        client that asked reads it back.
        """

        meta = event.get("metadata") or {}
        op, kwargs = str(meta.get("op", "")), dict(meta.get("kwargs") or {})
        entry = AuditEntry(
            id=derived_id("op", event["event_id"]), timestamp=utcnow(), session_id=event["session_id"],
            candidate_id=event["event_id"], decision="applied", reason=op, confidence=1.0, rule=f"op.{op}",
            kind="memory_op",
        )  # fmt: skip
        if self.journal.has_audit_entry(entry.id):
            return DrainReport()  # applied before a crash
        if op in MAINTENANCE:
            self._maintenance_op(event["event_id"], op, kwargs, entry)
            return DrainReport()
        try:
            entry.metadata = {"result": apply_op(self.lm, op, kwargs, event["event_id"])}
            if op == "review":
                self._rejected = None  # what review teaches applies from the next candidate on
        except LexmemError as exc:
            entry.decision, entry.reason = "failed", str(exc)
            entry.metadata = {"exit_code": exc.exit_code}
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            # Arguments the asking client got wrong (a missing id, an unknown field): it
            # hears so from this entry, rather than waiting for an answer that never comes.
            entry.decision = "failed"
            entry.reason = redact(f"cannot {op} with these arguments ({_first_line(exc)})").text
            entry.metadata = {"exit_code": InvalidInputError.exit_code}
        self.journal.audit([entry])
        return DrainReport()

    # -- seed 000's IMemoryCaptureService, for in-process callers (the app) ----------------

    def capture_from_conversation(
        self,
        user_message: str,
        assistant_response: str,
        *,
        conversation_id: str,
        project: str | None = None,
    ) -> list[Memory]:
        """CaptureFromConversationAsync: one turn analysed now (triggers boost salience)."""
        now = utcnow().isoformat()
        events: list[dict[str, Any]] = [
            {"event_id": str(uuid.uuid4()), "session_id": conversation_id, "event_type": t, "timestamp": now,
             "agent": "app", "project": project, "cwd": None, "content": c, "metadata": {}}
            for t, c in (("prompt", user_message), ("response", assistant_response))
        ]  # fmt: skip
        return self._memories(self._admit(self.extractor.extract(events), conversation_id, project))

    def capture_user_correction(
        self, original: str, corrected: str, context: str = "", *, project: str | None = None
    ) -> list[Memory]:
        """CaptureUserCorrectionAsync: the rule behind a correction, reinforced."""
        cand = self.extractor.correction(
            original, corrected, context, session_id="app", project=project
        )
        if cand is not None:
            cand = self._improve_correction(cand, original, corrected, context, project)
        return self._memories(self._admit([cand] if cand else [], "app", project))

    def capture_configuration_change(
        self, key: str, old: object, new: object, *, project: str | None = None
    ) -> list[Memory]:
        """CaptureConfigurationChangeAsync: a preference memory ("User prefers dark mode")."""
        cand = self.extractor.configuration(key, old, new, session_id="app", project=project)
        return self._memories(self._admit([cand], "app", project))

    def capture_workflow_pattern(
        self, actions: Sequence[dict[str, Any]], *, project: str | None = None
    ) -> list[Memory]:
        """CaptureWorkflowPatternAsync: >= 3 actions within 30 minutes become a procedure."""
        cand = self.extractor.workflow(actions, session_id="app", project=project)
        if cand is not None:
            steps = [_action_line(a) for a in actions if isinstance(a, dict)]
            cand = self._llm_improve(
                cand, "workflow", lambda llm: llm.workflow([s for s in steps if s]), project
            )
        return self._memories(self._admit([cand] if cand else [], "app", project))

    def capture_search_confirmation(self, query: str, memory_id: str) -> None:
        """CaptureSearchConfirmationAsync: reinforce the memory that answered ``query``."""
        self.lm.store.reinforce(memory_id, 0.1)
        log.info("[MEM:CAPTURE] Reinforced memory %s from successful search", memory_id)
        self.bus.publish(MemoryCaptured(None, MemorySource.SEARCH_CONFIRMATION, (memory_id,)))

    def _memories(self, report: DrainReport) -> list[Memory]:
        return self.lm.store.get_many(report.memory_ids)

    # -- the optional LLM (seeds 000 and 001): in addition to the rules, never instead --------

    def _llm_fallback(
        self, use: str, exc: LlmError, session_id: str, project: str | None, *key: str
    ) -> None:
        """One audit note for an LLM answer that could not be used (the rules' result stands)."""
        # A spent budget or an open circuit says so once per session a day, not per window.
        quiet = exc.reason in ("budget", "circuit-open")
        parts = (exc.reason, time.strftime("%Y-%m-%d")) if quiet else (use, *key)
        entry_id = derived_id("llm", session_id, *parts)
        self.journal.audit([AuditEntry(
            id=entry_id, timestamp=utcnow(), session_id=session_id, candidate_id=entry_id,
            decision="fallback", reason=f"{exc}; the rules' result stands", confidence=0.0,
            rule=f"llm.{use}", kind="llm", project=project, metadata={"llm_error": exc.reason},
        )])  # fmt: skip
        self.metrics[f"llm.fallback.{exc.reason}"] += 1

    def _llm_extract(
        self, events: Sequence[dict[str, Any]], found: Sequence[Candidate], session_id: str,
        project: str | None,
    ) -> list[Candidate]:  # fmt: skip
        """Seed 000's extraction of memorable content from the window's conversation, less
        what the rules found already."""
        from lexmem.capture.extract import CandidateKind, trigger_phrases

        llm = self.lm.llm
        talk = [e for e in events if e["event_type"] in ("prompt", "response")]
        talk = [e for e in talk if (e.get("content") or "").strip()]
        if llm is None or not talk or capture_mode(project, self.settings) == "off":
            return []
        speaker = {"prompt": "User", "response": "Assistant"}
        conversation = "\n\n".join(
            f"{speaker[e['event_type']]}: {redact(e['content']).text.strip()}" for e in talk
        )
        ids = tuple(e["event_id"] for e in talk)
        said = {e.get("speaker") or "" for e in talk}  # one speaker said it all, or none
        one = {"speaker": said.pop()} if len(said) == 1 and "" not in said else {}
        try:
            found_by_llm = llm.extract(
                conversation, turns=sum(e["event_type"] == "prompt" for e in talk)
            )
        except LlmError as exc:
            self._llm_fallback("extract", exc, session_id, project, *ids)
            return []
        kinds = {"semantic": CandidateKind.CONSTRAINT, "procedural": CandidateKind.PROCEDURE,
                 "episodic": CandidateKind.DECISION}  # fmt: skip
        seen = [(_words(c.text), particulars_of(c.text)) for c in found]
        out: list[Candidate] = []
        for x in found_by_llm:
            words, particulars = _words(x.content), particulars_of(x.content)
            if not words or any(
                _overlap(words, w) >= 0.6 and particulars == p for w, p in seen
            ):  # the rules (or an earlier answer) have it already; "port 5433" is not "5434"
                continue
            seen.append((words, particulars))
            kind = CandidateKind(x.kind) if x.kind else kinds[x.type.value]
            out.append(Candidate(
                kind=kind, title=make_title(x.content), text=x.content, type=x.type,
                confidence=round(x.confidence, 4), source=MemorySource.CONVERSATION, event_ids=ids,
                project=project, session_id=session_id, trigger=bool(trigger_phrases(x.content)),
                rule="llm-extraction", metadata={"candidate_kind": str(kind), "reinforce": False, **one},
            ))  # fmt: skip
        return out

    def _improve_correction(
        self, cand: Candidate, original: str, corrected: str, context: str, project: str | None
    ) -> Candidate:
        def ask(llm: LlmClient) -> str:
            clean = [redact(t).text for t in (original, corrected, context)]
            return llm.correction(*clean)

        return self._llm_improve(cand, "correction", ask, project)

    def _llm_improve(
        self, cand: Candidate, use: str, ask: Callable[[LlmClient], str | None], project: str | None
    ) -> Candidate:
        """Seed 000's correction and workflow synthesis: the LLM's wording when it answers,
        the rule's otherwise."""
        import dataclasses

        llm = self.lm.llm
        if llm is None:
            return cand
        try:
            text = ask(llm)
        except LlmError as exc:
            self._llm_fallback(use, exc, cand.session_id, project, cand.rule, *cand.event_ids,
                               cand.text)  # fmt: skip
            return cand
        if not text or len(text.split()) < 3:
            return cand  # "none", or too little to stand on its own: the rule's text is better
        prefix = cand.title.split(": ", 1)[0] + ": " if ": " in cand.title else ""
        return dataclasses.replace(
            cand, text=text, title=prefix + make_title(text, limit=80 - len(prefix)),
            metadata={**cand.metadata, "synthesised_by": "llm", "rule_text": cand.text},
        )  # fmt: skip

    # -- windows ------------------------------------------------------------------------

    def _window_or_let_go(self, session_id: str, *, final: bool) -> DrainReport:
        """Extract a window; one whose extraction fails (not for want of the disk or the
        model) is let go with an audit entry, rather than failing every drain after it."""
        try:
            return self._window(session_id, final=final)
        except Exception as exc:
            if environmental(exc):
                raise
            events = self.journal.buffered(session_id)
            ids = sorted(e["event_id"] for e in events)
            log.error("[MEM:CAPTURE] Extracting a window of session %s failed", session_id,
                      exc_info=exc)  # fmt: skip
            entry_id = derived_id("window-failed", session_id, *ids)
            self.journal.audit([AuditEntry(
                id=entry_id, timestamp=utcnow(), session_id=session_id, candidate_id=entry_id,
                decision="failed", confidence=0.0, rule="window", kind="window",
                reason=redact(f"extraction failed ({_first_line(exc)}); "
                              f"{len(ids)} events let go").text,
                metadata={"event_ids": ids},
            )])  # fmt: skip
            self.journal.release(ids)
            return DrainReport(skipped=len(ids))

    def _window(self, session_id: str, *, final: bool) -> DrainReport:
        events = agent_order(self.journal.buffered(session_id))
        if not events and not final:
            return DrainReport()
        # Taken in before their repository was opted out: let go unread.
        rules = self.optout_rules()
        gone = [e for e in events if opted_out_event(e, rules)]
        if gone:
            self._audit_opted_out(gone)
            self.journal.release([e["event_id"] for e in gone])
            events = [e for e in events if not opted_out_event(e, rules)]
        project = next((e.get("project") for e in events if e.get("project")), None)
        if project is None:
            s = self.journal.session(session_id)
            project = s.project if s else None
        if project_opted_out(project, rules):
            # What the extractor kept of the session's earlier windows is the
            # repository's too: no hand-off is written from it.
            self.extractor.forget(session_id)
            self.journal.release([e["event_id"] for e in events])
            return DrainReport(skipped=len(gone) + len(events))
        if events:
            candidates = self.extractor.extract(events, final=final)
            candidates += self._llm_extract(events, candidates, session_id, project)
        else:
            candidates = self.extractor.finish(session_id) if final else []
        report = self._admit(candidates, session_id, project)
        report.skipped += len(gone)
        self.journal.release([e["event_id"] for e in events])
        if final:
            report.sessions_closed += 1
        return report

    def _admit(
        self, candidates: Iterable[Candidate], session_id: str, project: str | None
    ) -> DrainReport:
        """Policy, dedupe, encode and store; every candidate gets one audit entry."""
        report = DrainReport()
        if project_opted_out(project, self.optout_rules()):
            # Every capture path ends here (windows, direct events, the app's own calls):
            # an opted-out repository's candidates leave one audit line, no title, no text.
            dropped = [c for c in candidates if c is not None]
            if dropped:
                # Its id derives from the session and events, so a retry writes it once;
                # the entry itself keeps nothing of where they came from.
                ident = derived_id(
                    "optout", session_id, *sorted(i for c in dropped for i in c.event_ids)
                )
                self.journal.audit([AuditEntry(
                    id=ident, timestamp=utcnow(), session_id=None, candidate_id=ident,
                    decision="skipped", reason="opted out", confidence=0.0, rule="optout",
                    kind="optout", metadata={"candidates": len(dropped)},
                )])  # fmt: skip
            report.skipped += len(dropped)
            return report
        mode = capture_mode(project, self.settings)
        threshold = MODE_THRESHOLDS.get(mode, 1.1)
        audit: list[AuditEntry] = []
        keep: list[tuple[Candidate, str]] = []
        for cand in candidates:
            # From events, a candidate's id is theirs: a retry after a crash finds it
            # stored. A direct call (seed 000's capture_* API) has no events and is not
            # retried: each call is its own candidate (the same change of a setting made
            # again, after another, is news; a repeat is caught as one below).
            cid = derived_id(
                "candidate", session_id, cand.rule, cand.title,
                *(sorted(cand.event_ids) or [uuid.uuid4().hex]),
            )  # fmt: skip
            entry = AuditEntry(
                id=derived_id("audit", cid), timestamp=utcnow(), session_id=session_id, candidate_id=cid,
                decision="skipped", reason="", confidence=cand.confidence, rule=cand.rule, kind=str(cand.kind),
                title=cand.title, project=project, text=cand.text,
            )  # fmt: skip
            if mode == "off":
                entry.reason, entry.text = "capture is off for this project", None
            elif cand.confidence < threshold:
                entry.reason = (
                    f"confidence {cand.confidence:.2f} below the {mode} threshold {threshold:.2f}"
                )
            elif len(cand.text.split()) < 3 and not cand.trigger:
                entry.reason = "too short to stand on its own"
            else:
                keep.append((cand, cid))
                continue
            audit.append(entry)
            report.skipped += 1
        if keep:
            report.add(self._store(keep, session_id, project, mode, audit))
        self.journal.audit(audit)
        if report.saved:
            self._count_session(session_id, report.saved)
        return report

    def _preferences(self, project: str | None) -> list[Memory]:
        """The active configuration memories of ``project`` (None: those of no project)."""
        flt = MemoryFilter(source=MemorySource.CONFIGURATION, project=project)  # active ones
        return [m for m in self.lm.store.list_memories(flt, limit=10_000) if m.project == project]

    def _same_preference(self, setting: str, content: str, project: str | None) -> str | None:
        for m in self._preferences(project):
            if m.metadata.get("setting") == setting and m.content == content:
                return m.id
        return None

    def _supersede_settings(self, stored: Sequence[Memory], project: str | None) -> None:
        """A setting changed again: its newer memory supersedes the older ones of the same
        setting and project (one preference per setting stays active)."""
        keys = {str(m.metadata.get("setting")): m.id for m in stored if m.metadata.get("setting")}
        if not keys:
            return
        for older in self._preferences(project):
            newer = keys.get(str(older.metadata.get("setting")))
            if newer and older.id != newer:
                self.lm.store.supersede(older.id, newer)
                log.info("[MEM:CAPTURE] Setting %s changed again: %s supersedes %s",
                         older.metadata.get("setting"), newer, older.id)  # fmt: skip

    def _store(
        self, keep: list[tuple[Candidate, str]], session_id: str, project: str | None, mode: str,
        audit: list[AuditEntry],
    ) -> DrainReport:  # fmt: skip
        from lexmem.encoder import EncodingRequest

        report = DrainReport()
        store = self.lm.store
        # Stored before a crash? Then it is done (deterministic ids make the retry a no-op),
        # but for its audit entry, which the crash may have come before (the audit write
        # keeps an entry that exists as it is).
        done = store.existing_ids([derived_id("memory", cid) for _, cid in keep])
        fresh = [(cand, cid) for cand, cid in keep if derived_id("memory", cid) not in done]
        audit.extend(
            AuditEntry(
                id=derived_id("audit", cid), timestamp=utcnow(), session_id=session_id,
                candidate_id=cid, decision="saved", reason=f"{cand.kind} at confidence {cand.confidence:.2f}",
                confidence=cand.confidence, rule=cand.rule, kind=str(cand.kind),
                memory_id=derived_id("memory", cid), title=cand.title, project=project,
            )
            for cand, cid in keep
            if derived_id("memory", cid) in done
        )  # fmt: skip
        requests = [
            EncodingRequest(
                redact(cand.text).text,  # the hook redacted already; the writer checks again
                MemoryContext(
                    source=cand.source,
                    project=project,
                    session_id=session_id,
                    title=cand.title,
                    capture_mode=mode,
                    user_id=self.lm.settings.store.user_id,
                    # In words: the rule and the session are in the audit entry and the
                    # memory's session_id; this is what a person reads in the browser.
                    learning_context=f"captured as a {str(cand.kind).replace('_', ' ')} during the session",
                    metadata={
                        "candidate_kind": str(cand.kind),
                        "event_ids": list(cand.event_ids),
                        **_speaker_of(cand),
                        **_setting_of(cand),
                    },
                ),
                explicit_type=cand.type,
            )
            for cand, _ in fresh
        ]
        by_request = self._encode_groups(requests)
        to_store: list[Memory] = []
        captured: dict[MemorySource, list[str]] = {}
        for (cand, cid), group in zip(fresh, by_request, strict=True):
            entry = AuditEntry(
                id=derived_id("audit", cid), timestamp=utcnow(), session_id=session_id, candidate_id=cid,
                decision="saved", reason="", confidence=cand.confidence, rule=cand.rule, kind=str(cand.kind),
                title=cand.title, project=project,
            )  # fmt: skip
            head = group[0]
            if head.metadata.get("llm_notes"):  # the LLM failed; the rules' result stands
                entry.metadata = {"llm_notes": head.metadata["llm_notes"]}
            if self._was_rejected(head, project):
                # The person rejected this text: the audit keeps no title of it either.
                entry.decision, entry.reason, entry.title = (
                    "skipped",
                    "rejected in review before",
                    "",
                )
                report.skipped += 1
                audit.append(entry)
                continue
            setting = _setting_of(cand).get("setting")
            # A preference repeats only the same setting's same value: "User prefers light
            # mode" is a change from "dark mode", however alike the two sentences read.
            existing = (
                self._same_preference(setting, head.content, project)
                if setting
                else self._duplicate_of(head, project, mode)
            )
            if existing is not None:
                store.reinforce(existing, 0.15 if cand.trigger else 0.1)
                entry.decision, entry.reason, entry.memory_id = (
                    "reinforced",
                    "repeats an existing memory",
                    existing,
                )
                report.reinforced += 1
                audit.append(entry)
                continue
            for i, m in enumerate(group):
                m.id = derived_id("memory", cid) if i == 0 else derived_id("memory", cid, str(i))
                m.confidence = cand.confidence
                if cand.trigger or cand.metadata.get("reinforce"):
                    m.salience = min(1.0, m.salience + 0.2)
                    m.last_reinforced_at = m.created_at
            to_store.extend(group)
            entry.memory_id, entry.reason = (
                group[0].id,
                f"{cand.kind} at confidence {cand.confidence:.2f}",
            )
            audit.append(entry)
            captured.setdefault(cand.source, []).extend(m.id for m in group)
            report.saved += len(group)
            report.memory_ids.extend(m.id for m in group)
        if to_store:
            store.store_many(to_store)
            self._supersede_settings(to_store, project)
        for source, ids in captured.items():
            self.metrics[f"captured.{source}"] += len(ids)
            log.info(
                "[MEM:CAPTURE] Captured %d %s memories from session %s",
                len(ids),
                source,
                session_id,
            )
            self.bus.publish(MemoryCaptured(session_id, source, tuple(ids)))
        return report

    def _encode_groups(self, requests: Sequence[Any]) -> list[list[Memory]]:
        """Encode in one batch; returns each request's memories (several for a chunked text)."""
        encoded = iter(self.lm.encoder.encode_batch(requests) if requests else [])
        groups = []
        for _ in requests:
            first = next(encoded)
            total = first.chunk.total_chunks if first.chunk else 1
            groups.append([first, *(next(encoded) for _ in range(total - 1))])
        return groups

    def _duplicate_of(self, m: Memory, project: str | None, mode: str) -> str | None:
        """An active memory this one repeats: same fingerprint within 30 days, or near in meaning."""
        store = self.lm.store
        since = utcnow() - DEDUPE_WINDOW
        fp = fingerprint(m.title, m.content, project, m.type)
        if (same := store.recent_fingerprint(fp, since)) is not None:
            return same
        flt = MemoryFilter(project=project) if project else MemoryFilter()
        hits = store.nearest(m.embedding, flt, 3) if m.embedding is not None else []
        for hit in hits:
            if hit.similarity < NEAR_DUPLICATE.get(mode, 0.9):
                break
            # Close in meaning is not enough when the particulars differ: "port 5433" and
            # "port 5434" embed almost alike but are different facts.
            if particulars_of(hit.content) == particulars_of(m.content):
                return hit.id
        return None

    def _was_rejected(self, m: Memory, project: str | None) -> bool:
        """The person rejected this candidate (or one saying the same) in review before."""
        if self._rejected is None:
            self._rejected = self.journal.rejected()
        if not self._rejected:
            return False
        fp = fingerprint(m.title, m.content, project, m.type)
        for r in self._rejected:
            if r["fingerprint"] == fp:
                return True
            if r["embedding"] is None or m.embedding is None or r["project"] != project:
                continue
            cos = sum(a * b for a, b in zip(r["embedding"], m.embedding, strict=False))
            if cos >= REJECTED_NEAR and r["particulars"] == particulars_key(m.content):
                return True
        return False

    def _count_session(self, session_id: str, n: int) -> None:
        s = self.journal.session(session_id)
        if s is not None:
            s.memory_count += n
            self.journal.save_sessions([s])


def _setting_of(cand: Candidate) -> dict[str, str]:
    """A configuration memory names its setting, so that the next change of it supersedes
    it."""
    key = cand.metadata.get("key") if cand.kind == CandidateKind.CONFIGURATION else None
    return {"setting": str(key)} if key else {}


def _speaker_of(cand: Candidate) -> dict[str, str]:
    """``{"speaker": ...}`` for a memory drawn from one speaker's turns (the extractor says
    who in the candidate's metadata); empty when no single speaker said them."""
    speaker = cand.metadata.get("speaker")
    return {"speaker": speaker} if isinstance(speaker, str) and speaker else {}


def _words(text: str) -> frozenset[str]:
    return frozenset(w for w in re.findall(r"[a-z0-9_.-]+", text.lower()) if len(w) > 2)


def _overlap(a: frozenset[str], b: frozenset[str]) -> float:
    """How much two statements share, 0 to 1 (of the shorter one's words)."""
    return len(a & b) / min(len(a), len(b)) if a and b else 0.0


def _action_line(action: dict[str, Any]) -> str:
    """A seed-000 ``UserAction`` (or a tool-call event) as one line for the LLM, redacted."""
    meta = action.get("metadata") if isinstance(action.get("metadata"), dict) else {}
    kind = action.get("action_type") or action.get("ActionType") or action.get("event_type") or ""
    what = (action.get("description") or action.get("Description") or action.get("content")
            or (meta or {}).get("command") or "")  # fmt: skip
    line = f"{kind}: {what}" if kind and what else str(kind or what)
    return redact(line.strip()).text[:300]


def _parse(stamp: str) -> datetime:
    return datetime.fromisoformat(stamp.replace("Z", "+00:00"))
