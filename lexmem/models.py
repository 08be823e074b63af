"""The memory model: the values every layer of lexmem passes around.

Plain dataclasses and string enums, no I/O. Seed 004 gives the fields of a memory,
seed 002 its provenance (source, session, chunk metadata), seed 001 the
classification result.
"""

from __future__ import annotations

import dataclasses
import hashlib
import re
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

__all__ = [
    "Changes",
    "ChunkMetadata",
    "ClassificationMethod",
    "ConfidencePoint",
    "Memory",
    "MemoryContext",
    "MemoryLink",
    "MemorySource",
    "MemoryStatus",
    "MemoryType",
    "TypeClassification",
    "fingerprint",
    "make_title",
    "new_id",
    "utcnow",
]


class MemoryType(StrEnum):
    """What kind of knowledge a memory holds (seed 001)."""

    SEMANTIC = "semantic"  # facts, preferences, definitions
    EPISODIC = "episodic"  # events anchored in time
    PROCEDURAL = "procedural"  # how to do something


class MemoryStatus(StrEnum):
    ACTIVE = "active"
    ARCHIVED = "archived"
    SUPERSEDED = "superseded"


class MemorySource(StrEnum):
    """Where a memory came from (DESIGN.md; seed 000 §6 and seed 002)."""

    HOOK_EVENT = "hook_event"
    AGENT_RESPONSE = "agent_response"
    MARKDOWN_CHUNK = "markdown_chunk"
    CONVERSATION = "conversation"
    CORRECTION = "correction"
    CONFIGURATION = "configuration"
    WORKFLOW = "workflow"
    SEARCH_CONFIRMATION = "search_confirmation"
    EXPLICIT = "explicit"


class ClassificationMethod(StrEnum):
    RULE_BASED = "rule_based"
    LLM_BASED = "llm_based"
    EXPLICIT = "explicit"


@dataclass(frozen=True, slots=True)
class TypeClassification:
    """Result of classifying content into a memory type (seed 001)."""

    type: MemoryType
    confidence: float
    method: ClassificationMethod
    rationale: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "type": self.type.value,
            "confidence": round(self.confidence, 4),
            "method": self.method.value,
            "rationale": self.rationale,
        }


@dataclass(frozen=True, slots=True)
class ChunkMetadata:
    """Where a chunk sits in its source text (seed 002)."""

    file_path: str
    chunk_index: int
    total_chunks: int
    word_offset: int
    char_offset: int
    original_file_hash: str


@dataclass(frozen=True, slots=True)
class MemoryContext:
    """How and where content was learned; the encoder copies it into the memory."""

    source: MemorySource = MemorySource.EXPLICIT
    project: str | None = None
    user_id: str = "local"
    session_id: str | None = None
    conversation_id: str | None = None
    learning_context: str | None = None
    source_document: str | None = None
    capture_mode: str | None = None
    title: str | None = None
    pinned: bool = False
    salience: float | None = None
    importance: float | None = None
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Memory:
    """One memory. Field names follow DESIGN.md; seed 004 names in comments."""

    content: str
    type: MemoryType = MemoryType.SEMANTIC  # memory_type
    id: str = field(default_factory=lambda: new_id())
    title: str = ""
    embedding: list[float] | None = None
    created_at: datetime = field(default_factory=lambda: utcnow())
    updated_at: datetime | None = None
    last_accessed_at: datetime = field(default_factory=lambda: utcnow())
    access_count: int = 0
    last_reinforced_at: datetime | None = None
    salience: float = 0.5  # current_salience
    importance: float = 0.5  # importance_score
    pinned: bool = False
    status: MemoryStatus = MemoryStatus.ACTIVE
    superseded_by: str | None = None
    source: MemorySource = MemorySource.EXPLICIT
    session_id: str | None = None
    conversation_id: str | None = None  # source_conversation_id
    project: str | None = None  # project_id: a repository root or a named project
    user_id: str = "local"
    learning_context: str | None = None
    source_document: str | None = None  # source_document_id: a file path or document id
    chunk: ChunkMetadata | None = None
    fingerprint: str = ""
    capture_mode: str | None = None
    confidence: float = 1.0
    classification_method: ClassificationMethod = ClassificationMethod.EXPLICIT
    word_count: int = 0
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.title:
            self.title = make_title(self.content)
        if not self.word_count:
            self.word_count = len(self.content.split())
        if not self.fingerprint:
            self.fingerprint = fingerprint(self.title, self.content, self.project, self.type)

    def replace(self, **changes: Any) -> Memory:
        return dataclasses.replace(self, **changes)

    def to_dict(self, *, with_embedding: bool = False) -> dict[str, Any]:
        """A JSON-ready view (timestamps as ISO 8601 strings)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "embedding" and not with_embedding:
                continue
            if isinstance(value, datetime):
                value = value.isoformat()
            elif isinstance(value, StrEnum):
                value = value.value
            elif isinstance(value, ChunkMetadata):
                value = dataclasses.asdict(value)
            out[f.name] = value
        return out


@dataclass(frozen=True, slots=True)
class MemoryLink:
    """A typed, directed edge between two memories; unique per (from, to, type)."""

    from_id: str
    to_id: str
    link_type: str
    strength: float = 0.5
    id: str = field(default_factory=lambda: new_id())
    created_at: datetime = field(default_factory=lambda: utcnow())


@dataclass(frozen=True, slots=True)
class ConfidencePoint:
    """One point of a memory's confidence trajectory."""

    memory_id: str
    confidence: float
    recorded_at: datetime
    id: str = ""


@dataclass(frozen=True, slots=True)
class Changes:
    """What a mutation changed, so every view can redraw just that (STYLE.md 2)."""

    created: tuple[str, ...] = ()
    updated: tuple[str, ...] = ()
    deleted: tuple[str, ...] = ()
    links: bool = False
    counts: bool = False

    def __bool__(self) -> bool:
        return bool(self.created or self.updated or self.deleted or self.links)

    def merge(self, other: Changes) -> Changes:
        return Changes(
            created=self.created + other.created,
            updated=self.updated + other.updated,
            deleted=self.deleted + other.deleted,
            links=self.links or other.links,
            counts=self.counts or other.counts,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "created": list(self.created),
            "updated": list(self.updated),
            "deleted": list(self.deleted),
            "links": self.links,
        }


def new_id() -> str:
    return str(uuid.uuid4())


def utcnow() -> datetime:
    """Now, in UTC, at the microsecond precision the store keeps."""
    return datetime.now(UTC)


_WS = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")


def make_title(content: str, limit: int = 80) -> str:
    """A short title: the first sentence (or line), cut at a word boundary."""
    text = content.strip().split("\n", 1)[0].strip()
    text = _SENTENCE_END.split(text, 1)[0].strip()
    text = _WS.sub(" ", text)
    if len(text) <= limit:
        return text
    cut = text[: limit - 1].rsplit(" ", 1)[0]
    return (cut or text[: limit - 1]) + "…"


def _normalise(text: str | None) -> str:
    return _WS.sub(" ", (text or "").strip().lower())


def fingerprint(title: str, content: str, project: str | None, mtype: MemoryType | str) -> str:
    """sha256 over normalised title, text, project and type (seed 003's dedupe key)."""
    parts = [_normalise(title), _normalise(content), _normalise(project), str(mtype)]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()
