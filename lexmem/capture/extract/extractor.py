"""The :class:`Extractor`: per-session state between windows, dedupe and the per-turn cap,
the handoff, and seed 000's direct capture points; and :func:`confirmations`."""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lexmem.capture.extract.candidates import Candidate, CandidateKind, ExtractOptions
from lexmem.capture.extract.corrections import _configuration, _correction_text
from lexmem.capture.extract.statements import _Digest, _Draft, _Pass
from lexmem.capture.extract.text import _WS, _bound_text, _clip, _finish, _norm_quotes, _title
from lexmem.capture.extract.thresholds import (
    C_HANDOFF_EDITED,
    C_HANDOFF_FIXED,
    C_HANDOFF_THIN,
    C_HANDOFF_VERIFIED,
    HANDOFF_DECISION,
    MAX_SESSIONS,
)
from lexmem.capture.extract.tools import _Event, _event, _parse_time
from lexmem.capture.extract.workflows import _delta, _Step, _steps_of_reported, _workflow
from lexmem.models import MemorySource, MemoryType

__all__ = ["Extractor", "confirmations"]


@dataclass(slots=True)
class _Session:
    digest: _Digest
    tail: list[Mapping[str, Any]] = field(default_factory=list)


# ----------------------------------------------------------------- public


def confirmations(events: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(memory_id, query) for each ``search_confirmation`` event, in order, once each.

    A confirmation is no new memory: the service reinforces the memory that was
    found (seed 000 CaptureSearchConfirmation).
    """
    out: list[tuple[str, str]] = []
    for raw in events:
        if str(raw.get("event_type") or "").lower() != "search_confirmation":
            continue
        meta = raw.get("metadata")
        if not isinstance(meta, Mapping):
            continue
        memory_id = str(meta.get("memory_id") or meta.get("result_id") or "")
        if not memory_id:
            continue
        pair = (memory_id, str(meta.get("query") or ""))
        if pair not in out:
            out.append(pair)
    return out


def _dedupe_key(text: str) -> str:
    return re.sub(r"[^\w\s]", "", _WS.sub(" ", text.lower())).strip()


class Extractor:
    """Turns windows of session events into memory candidates (see :mod:`lexmem.capture.extract`)."""

    def __init__(self, options: ExtractOptions | None = None) -> None:
        self.options = options or ExtractOptions()
        self._sessions: OrderedDict[str, _Session] = OrderedDict()

    # ---------------------------------------------------------------- windows

    def extract(
        self, events: Sequence[Mapping[str, Any]], *, final: bool = False
    ) -> list[Candidate]:
        """Candidates from one window of events (in session order).

        ``final=True`` (session end) adds one HANDOFF candidate per session and forgets
        the session. Windows of several sessions are split by ``session_id``.
        """
        by_session: dict[str, list[Mapping[str, Any]]] = {}
        for raw in events:
            if isinstance(raw, Mapping):
                by_session.setdefault(str(raw.get("session_id") or ""), []).append(raw)
        out: list[Candidate] = []
        for session_id, window in by_session.items():
            out.extend(self._extract_session(session_id, window, final))
        return out

    def _extract_session(
        self, session_id: str, window: list[Mapping[str, Any]], final: bool
    ) -> list[Candidate]:
        state = self._sessions.pop(session_id, None) or _Session(_Digest(session_id))
        ids = {str(r.get("event_id")) for r in window if r.get("event_id")}
        tail = [r for r in state.tail if str(r.get("event_id")) not in ids]
        raws = tail + window
        evs = [_event(r, i) for i, r in enumerate(raws)]
        p = _Pass(self.options, evs, len(tail), state.digest)
        p.run(final)
        drafts = [d for d in p.drafts if d.anchor >= len(tail)]
        for d in drafts:
            if d.kind is CandidateKind.FIX:
                state.digest.fixes.append(d.title)
            elif d.kind is CandidateKind.DECISION and d.confidence >= HANDOFF_DECISION:
                state.digest.decisions.append(d.title)
            elif d.kind in (CandidateKind.QUESTION,):
                state.digest.opens.append(d.title)
        candidates = self._finalise(drafts, evs, session_id)
        if final:
            handoff = self._handoff(state.digest)
            if handoff is not None:
                candidates.append(handoff)
        else:
            state.tail = raws[p.tail_start() :]
            self._sessions[session_id] = state
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return candidates

    def _finalise(
        self, drafts: list[_Draft], evs: list[_Event], session_id: str
    ) -> list[Candidate]:
        # Dedupe: the same statement twice is one candidate with both provenances.
        merged: dict[str, _Draft] = {}
        for d in drafts:
            key = _dedupe_key(d.text)
            prev = merged.get(key)
            if prev is None:
                merged[key] = d
                continue
            keep, other = (prev, d) if prev.confidence >= d.confidence else (d, prev)
            keep.ids = sorted(set(keep.ids) | set(other.ids))
            keep.trigger = keep.trigger or other.trigger
            keep.anchor = min(keep.anchor, other.anchor)
            merged[key] = keep
        # Cap per turn, keeping the most confident (seed 000 MaxMemoriesPerTurn).
        per_turn: dict[int, list[_Draft]] = {}
        kept: list[_Draft] = []
        for d in merged.values():
            if d.capped:
                per_turn.setdefault(d.turn, []).append(d)
            else:
                kept.append(d)
        for turn_drafts in per_turn.values():
            turn_drafts.sort(key=lambda d: (-d.confidence, d.anchor, d.seq))
            kept.extend(turn_drafts[: max(0, self.options.max_per_turn)])
        kept.sort(key=lambda d: (d.anchor, d.seq))
        out: list[Candidate] = []
        for d in kept:
            anchor = evs[d.anchor] if d.anchor < len(evs) else None
            meta = {"candidate_kind": d.kind.value, **d.meta}
            meta.setdefault(
                "reinforce", d.kind in (CandidateKind.CORRECTION, CandidateKind.EXPLICIT)
            )
            meta["turn"] = d.turn
            speaker = _one_speaker(evs[i] for i in d.ids if i < len(evs))
            if speaker:
                meta["speaker"] = speaker
            if anchor is not None:
                meta["agent"] = anchor.agent
                if anchor.ts is not None:
                    meta["timestamp"] = anchor.ts.isoformat()
            out.append(
                Candidate(
                    kind=d.kind,
                    title=d.title,
                    text=d.text,
                    type=d.type,
                    confidence=round(min(1.0, max(0.0, d.confidence)), 4),
                    source=d.source,
                    event_ids=tuple(
                        dict.fromkeys(evs[i].id for i in sorted(d.ids) if i < len(evs))
                    ),
                    project=(anchor.project if anchor else None)
                    or next((e.project for e in evs if e.project), None),
                    session_id=(anchor.session if anchor else "") or session_id,
                    trigger=d.trigger,
                    rule=d.rule,
                    metadata=meta,
                )
            )
        return out

    def _handoff(self, d: _Digest) -> Candidate | None:
        """One summary of the session: goal, changes, commands, fixes, open items, outcome."""
        if not d.goal and not d.files and not d.commands:
            return None
        parts: list[str] = []
        if d.goal:
            parts.append(f"Goal: {_finish(d.goal)}")
        if d.files:
            files = list(d.files)
            more = f" (+{len(files) - 10} more)" if len(files) > 10 else ""
            parts.append(f"Changed {len(files)} file(s): {', '.join(files[:10])}{more}.")
        if d.commands:
            shown = []
            for cmd, ok in list(d.commands.items())[-8:]:
                status = " (passed)" if ok else " (failed)" if ok is False else ""
                shown.append(f"`{cmd}`{status}")
            parts.append("Ran: " + ", ".join(shown) + ".")
        if d.fixes:
            parts.append("Fixed: " + "; ".join(t.removeprefix("Fix: ") for t in d.fixes[:5]) + ".")
        if d.decisions:
            parts.append(
                "Decided: " + "; ".join(t.removeprefix("Decision: ") for t in d.decisions[:5]) + "."
            )
        if d.opens:
            parts.append("Open: " + "; ".join(t.split(": ", 1)[-1] for t in d.opens[:5]) + ".")
        if d.outcome:
            parts.append(f"Outcome: {_finish(d.outcome)}")
        text = _bound_text(" ".join(parts))
        if d.edits and d.verified:
            conf = C_HANDOFF_FIXED if d.fixes else C_HANDOFF_VERIFIED
        elif d.edits:
            conf = C_HANDOFF_EDITED
        else:
            conf = C_HANDOFF_THIN
        ids = tuple(i for i in (d.goal_id, d.verify_id, d.outcome_id) if i)
        meta: dict[str, Any] = {
            "candidate_kind": CandidateKind.HANDOFF.value,
            "files": list(d.files)[:50],
            "commands": list(d.commands)[:20],
            "edits": d.edits,
            "verified": d.verified,
            "agent": d.agent,
            "reinforce": False,
        }
        if d.first_ts is not None:
            meta["timestamp"] = d.first_ts.isoformat()
        return Candidate(
            kind=CandidateKind.HANDOFF,
            title=_title("Handoff", d.goal or "session summary"),
            text=text,
            type=MemoryType.EPISODIC,
            confidence=conf,
            source=MemorySource.HOOK_EVENT,
            event_ids=ids,
            project=d.project,
            session_id=d.session,
            trigger=False,
            rule="handoff",
            metadata=meta,
        )

    def finish(self, session_id: str) -> list[Candidate]:
        """End a session whose last window was already extracted: pending fix, handoff.

        Same as ``extract([], final=True)`` would be if an empty window could name its
        session. Returns nothing for a session this extractor does not know.
        """
        if session_id not in self._sessions:
            return []
        return self._extract_session(session_id, [], final=True)

    def forget(self, session_id: str) -> None:
        """Drop what is remembered of a session (when the service abandons it)."""
        self._sessions.pop(session_id, None)

    # ------------------------------------------------- seed 000 capture points

    def correction(
        self,
        original: str,
        corrected: str,
        context: str = "",
        *,
        session_id: str = "",
        project: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Candidate | None:
        """Seed 000 CaptureUserCorrection: the user replaced the agent's output.

        The rule comes from a word diff: one replaced phrase in a short sentence gives
        "<corrected sentence>, not <old phrase>"; several give "Use “X”, not “Y”; ...".
        A wholesale rewrite gives a low-confidence note. None when only whitespace
        changed.
        """
        if not corrected or not corrected.strip():
            return None
        synthesised = _correction_text(_norm_quotes(original or ""), _norm_quotes(corrected))
        if synthesised is None:
            return None
        text, conf, rule = synthesised
        if context.strip():
            text = f"{text} Context: {_finish(_clip(context, 200))}"
        return Candidate(
            kind=CandidateKind.CORRECTION,
            title=_title("Correction", text),
            text=_bound_text(text),
            type=MemoryType.SEMANTIC,
            confidence=conf,
            source=MemorySource.CORRECTION,
            event_ids=tuple(event_ids),
            project=project,
            session_id=session_id,
            trigger=False,
            rule=rule,
            metadata={"candidate_kind": "correction", "reinforce": True, "context": context[:200]},
        )

    def configuration(
        self,
        key: str,
        old: object,
        new: object,
        *,
        session_id: str = "",
        project: str | None = None,
        event_ids: Sequence[str] = (),
    ) -> Candidate:
        """Seed 000 CaptureConfigurationChange: "User prefers dark mode" and the like."""
        text, title, conf, meta = _configuration(str(key), old, new)
        return Candidate(
            kind=CandidateKind.CONFIGURATION,
            title=title,
            text=text,
            type=MemoryType.SEMANTIC,
            confidence=conf,
            source=MemorySource.CONFIGURATION,
            event_ids=tuple(event_ids),
            project=project,
            session_id=session_id,
            trigger=False,
            rule="configuration-change",
            metadata={"candidate_kind": "configuration", **meta},
        )

    def workflow(
        self,
        actions: Sequence[Mapping[str, Any]],
        *,
        session_id: str = "",
        project: str | None = None,
    ) -> Candidate | None:
        """Seed 000 CaptureWorkflowPattern: a procedure from observed actions, or None.

        Actions are seed-000 ``UserAction`` mappings (``action_type``, ``description``,
        ``timestamp``, ``metadata`` with an optional ``command``) or tool-call events.
        None when there are fewer than ``min_actions_for_pattern`` actions, when they
        span more than the pattern window, or when they form no procedure (reads,
        searches, actions that cannot be named).
        """
        if len(actions) < self.options.min_actions_for_pattern:
            return None
        steps: list[_Step] = []
        times: list[datetime] = []
        for i, action in enumerate(actions):
            if not isinstance(action, Mapping):
                continue
            ts = _parse_time(action.get("timestamp") or action.get("Timestamp"))
            if ts is not None:
                times.append(ts)
            steps.extend(_steps_of_reported(action, i))
        if times and _delta(min(times, key=_sort_time), max(times, key=_sort_time)) > timedelta(
            minutes=self.options.pattern_window_minutes
        ):
            return None
        wf = _workflow(steps, self.options, reported=True, project=project)
        if wf is None:
            return None
        text, title, conf, meta = wf
        ids = tuple(
            str(a.get("event_id")) for a in actions if isinstance(a, Mapping) and a.get("event_id")
        )
        return Candidate(
            kind=CandidateKind.WORKFLOW,
            title=title,
            text=text,
            type=MemoryType.PROCEDURAL,
            confidence=conf,
            source=MemorySource.WORKFLOW,
            event_ids=ids,
            project=project,
            session_id=session_id,
            trigger=False,
            rule="workflow-reported",
            metadata={"candidate_kind": "workflow", **meta},
        )

    @staticmethod
    def confirmations(events: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
        """See :func:`confirmations`."""
        return confirmations(events)


def _one_speaker(events: Iterable[_Event]) -> str:
    """The speaker of these events' conversation turns when one person (or agent) said
    them all; "" when turns have different speakers, or one has none, or there are no
    turns (tool activity is said by no one)."""
    said = {e.speaker for e in events if e.type in ("prompt", "response")}
    return next(iter(said)) if len(said) == 1 else ""


def _sort_time(ts: datetime) -> float:
    try:
        return ts.timestamp()
    except (OverflowError, OSError, ValueError):
        return 0.0
