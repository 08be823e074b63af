"""The layout of the store's tables: their names, Arrow schemas and layout version, and
how a :class:`~lexmem.models.Memory` becomes a row and back.

Apart from the store itself so that migrations and backups, which the store calls,
can name the layout without importing the store.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from lexmem.models import (
    ChunkMetadata,
    ClassificationMethod,
    Memory,
    MemorySource,
    MemoryStatus,
    MemoryType,
)

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "CONFIDENCE",
    "ERASE_KEYS",
    "LINKS",
    "ROW_COLUMNS",
    "SESSION_SOURCES",
    "STORE_SCHEMA_VERSION",
    "confidence_schema",
    "links_schema",
    "memory_from_row",
    "memory_schema",
    "memory_to_row",
    "table_schema",
]

# The layout of the store's tables; 2 added the memories' ``context`` column (the steps
# between layouts are in :mod:`lexmem.store.migrations`).
STORE_SCHEMA_VERSION = 2
LINKS = "links"
CONFIDENCE = "confidence"
# The unique key of each table an erasure may rewrite (see MemoryStore.erase).
ERASE_KEYS = {"memories": "id", LINKS: "id", CONFIDENCE: "id"}

# Columns other than the vector; reads that do not need vectors select these.
ROW_COLUMNS = (
    "id", "type", "title", "content", "created_at", "updated_at", "last_accessed_at",
    "access_count", "last_reinforced_at", "salience", "importance", "pinned", "status",
    "superseded_by", "source", "session_id", "conversation_id", "project", "user_id",
    "learning_context", "source_document", "chunk_index", "total_chunks", "word_offset",
    "char_offset", "source_hash", "fingerprint", "capture_mode", "confidence",
    "classification_method", "word_count", "metadata",
)  # fmt: skip

# Whose session is a conversation in order, so that neighbours are context: memories
# captured from an agent session or a conversation. Memories remembered on purpose
# share one bucket per client ("cli-explicit", "app"), where the one kept before is
# no context of the next; notes, corrections and settings stand alone too. Every
# backend's context and search's session read go by it.
SESSION_SOURCES = frozenset({"hook_event", "agent_response", "conversation"})


def memory_schema(dim: int) -> pa.Schema:
    import pyarrow as pa

    ts = pa.timestamp("us", tz="UTC")
    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("type", pa.string(), nullable=False),
            pa.field("title", pa.string()),
            pa.field("content", pa.string(), nullable=False),
            pa.field("vector", pa.list_(pa.float32(), dim)),
            pa.field("created_at", ts, nullable=False),
            pa.field("updated_at", ts),
            pa.field("last_accessed_at", ts, nullable=False),
            pa.field("access_count", pa.int64()),
            pa.field("last_reinforced_at", ts),
            pa.field("salience", pa.float64()),
            pa.field("importance", pa.float64()),
            pa.field("pinned", pa.bool_()),
            pa.field("status", pa.string()),
            pa.field("superseded_by", pa.string()),
            pa.field("source", pa.string()),
            pa.field("session_id", pa.string()),
            pa.field("conversation_id", pa.string()),
            pa.field("project", pa.string()),
            pa.field("user_id", pa.string()),
            pa.field("learning_context", pa.string()),
            pa.field("source_document", pa.string()),
            pa.field("chunk_index", pa.int32()),
            pa.field("total_chunks", pa.int32()),
            pa.field("word_offset", pa.int32()),
            pa.field("char_offset", pa.int32()),
            pa.field("source_hash", pa.string()),
            pa.field("fingerprint", pa.string()),
            pa.field("capture_mode", pa.string()),
            pa.field("confidence", pa.float64()),
            pa.field("classification_method", pa.string()),
            pa.field("word_count", pa.int32()),
            pa.field("metadata", pa.string()),
        ]
    )


def table_schema(dim: int) -> pa.Schema:
    """The memories table: a memory's fields (:func:`memory_schema`, what exports hold)
    and ``context``, the content of the memories before and after it in its
    conversation session (see :data:`SESSION_SOURCES`). Context is derived, kept current by the store and
    searched as a field of its own; exports leave it out and imports rebuild it."""
    import pyarrow as pa

    return memory_schema(dim).append(pa.field("context", pa.string()))


def links_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("from_id", pa.string(), nullable=False),
            pa.field("to_id", pa.string(), nullable=False),
            pa.field("link_type", pa.string(), nullable=False),
            pa.field("strength", pa.float64()),
            pa.field("created_at", pa.timestamp("us", tz="UTC")),
        ]
    )


def confidence_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            pa.field("id", pa.string(), nullable=False),
            pa.field("memory_id", pa.string(), nullable=False),
            pa.field("confidence", pa.float64()),
            pa.field("recorded_at", pa.timestamp("us", tz="UTC")),
        ]
    )


_OPTIONAL_TEXT = (
    "superseded_by", "session_id", "conversation_id", "project", "learning_context",
    "source_document", "source_hash", "capture_mode",
)  # fmt: skip


def memory_to_row(m: Memory) -> dict[str, Any]:
    c = m.chunk
    row = {
        "id": m.id,
        "type": str(m.type),
        "title": m.title,
        "content": m.content,
        "vector": m.embedding,
        "created_at": m.created_at,
        "updated_at": m.updated_at,
        "last_accessed_at": m.last_accessed_at,
        "access_count": m.access_count,
        "last_reinforced_at": m.last_reinforced_at,
        "salience": float(m.salience),
        "importance": float(m.importance),
        "pinned": bool(m.pinned),
        "status": str(m.status),
        "superseded_by": m.superseded_by,
        "source": str(m.source),
        "session_id": m.session_id,
        "conversation_id": m.conversation_id,
        "project": m.project,
        "user_id": m.user_id,
        "learning_context": m.learning_context,
        "source_document": m.source_document or (c.file_path if c else None),
        "chunk_index": c.chunk_index if c else None,
        "total_chunks": c.total_chunks if c else None,
        "word_offset": c.word_offset if c else None,
        "char_offset": c.char_offset if c else None,
        "source_hash": c.original_file_hash if c else None,
        "fingerprint": m.fingerprint,
        "capture_mode": m.capture_mode,
        "confidence": float(m.confidence),
        "classification_method": str(m.classification_method),
        "word_count": m.word_count,
        "metadata": json.dumps(m.metadata, sort_keys=True) if m.metadata else None,
    }
    # An empty optional string is stored as NULL: one representation survives every
    # export format (CSV cannot tell '' from NULL).
    for key in _OPTIONAL_TEXT:
        if row[key] == "":
            row[key] = None
    return row


def _float(row: dict[str, Any], key: str, default: float) -> float:
    value = row.get(key)
    return default if value is None else float(value)


def memory_from_row(row: dict[str, Any]) -> Memory:
    chunk = None
    if row.get("chunk_index") is not None:
        chunk = ChunkMetadata(
            file_path=row.get("source_document") or "",
            chunk_index=row["chunk_index"],
            total_chunks=row.get("total_chunks") or 1,
            word_offset=row.get("word_offset") or 0,
            char_offset=row.get("char_offset") or 0,
            original_file_hash=row.get("source_hash") or "",
        )
    vector = row.get("vector")
    return Memory(
        id=row["id"],
        type=MemoryType(row["type"]),
        title=row.get("title") or "",
        content=row["content"],
        embedding=list(vector) if vector is not None else None,
        created_at=row["created_at"],
        updated_at=row.get("updated_at"),
        last_accessed_at=row["last_accessed_at"],
        access_count=row.get("access_count") or 0,
        last_reinforced_at=row.get("last_reinforced_at"),
        salience=_float(row, "salience", 0.5),
        importance=_float(row, "importance", 0.5),
        pinned=bool(row.get("pinned")),
        status=MemoryStatus(row.get("status") or "active"),
        superseded_by=row.get("superseded_by"),
        source=MemorySource(row.get("source") or "explicit"),
        session_id=row.get("session_id"),
        conversation_id=row.get("conversation_id"),
        project=row.get("project"),
        user_id=row.get("user_id") or "local",
        learning_context=row.get("learning_context"),
        source_document=row.get("source_document"),
        chunk=chunk,
        fingerprint=row.get("fingerprint") or "",
        capture_mode=row.get("capture_mode"),
        confidence=_float(row, "confidence", 1.0),
        classification_method=ClassificationMethod(row.get("classification_method") or "explicit"),
        word_count=row.get("word_count") or 0,
        metadata=json.loads(row["metadata"]) if row.get("metadata") else {},
    )
