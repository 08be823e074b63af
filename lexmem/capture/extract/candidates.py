"""What extraction proposes: :class:`Candidate`, its :class:`CandidateKind`, and the
tuning in :class:`ExtractOptions`."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from lexmem.capture.extract.thresholds import (
    MAX_PER_TURN,
    MIN_ACTIONS_FOR_PATTERN,
    PATTERN_WINDOW_MINUTES,
)
from lexmem.models import MemorySource, MemoryType

__all__ = ["Candidate", "CandidateKind", "ExtractOptions"]


class CandidateKind(StrEnum):
    """What a candidate is about (seed 003's candidate types, seed 000's capture points)."""

    DECISION = "decision"
    FIX = "fix"
    CONSTRAINT = "constraint"
    PREFERENCE = "preference"
    PROCEDURE = "procedure"
    WORKFLOW = "workflow"
    QUESTION = "question"
    RISK = "risk"
    CORRECTION = "correction"
    EXPLICIT = "explicit"
    CONFIGURATION = "configuration"
    HANDOFF = "handoff"


@dataclass(frozen=True)
class Candidate:
    """A proposed memory, before policy, redaction, dedupe and writing.

    ``confidence`` is in [0, 1]; the service keeps a candidate when it reaches the
    capture mode's threshold. ``trigger`` says an explicit trigger phrase (seed 000's
    ``MemoryTriggerPatterns``) was present, which should boost salience;
    ``metadata["reinforce"]`` asks for the same boost for corrections. ``event_ids``
    name the events the candidate was drawn from, in session order;
    ``metadata["speaker"]`` says who said their conversation turns, when one speaker
    said them all (the writer keeps it on the memory).
    """

    kind: CandidateKind
    title: str
    text: str
    type: MemoryType
    confidence: float
    source: MemorySource
    event_ids: tuple[str, ...]
    project: str | None
    session_id: str
    trigger: bool = False
    rule: str = ""
    # Excluded from the hash so that a frozen candidate stays hashable.
    metadata: dict[str, Any] = field(default_factory=dict, hash=False)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready view (for the audit log)."""
        return {
            "kind": self.kind.value,
            "title": self.title,
            "text": self.text,
            "type": self.type.value,
            "confidence": round(self.confidence, 4),
            "source": self.source.value,
            "event_ids": list(self.event_ids),
            "project": self.project,
            "session_id": self.session_id,
            "trigger": self.trigger,
            "rule": self.rule,
            "metadata": dict(self.metadata),
        }


@dataclass(frozen=True)
class ExtractOptions:
    """Tuning from seed 000's ``MemoryCaptureOptions``."""

    min_actions_for_pattern: int = MIN_ACTIONS_FOR_PATTERN
    pattern_window_minutes: int = PATTERN_WINDOW_MINUTES
    max_per_turn: int = MAX_PER_TURN
