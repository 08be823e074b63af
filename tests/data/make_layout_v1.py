"""Write ``tests/data/layout_v1/``: a small data folder in lexmem's earliest layout.

Store layout 1 (``meta.json`` says ``schema_version: 1``): the memories table has no
``context`` column and no index on it. Settings layout 0: ``settings.toml`` has no
``schema_version`` and names the model at the top level. Nine memories (one conversation
session of three, a pinned fact, an archived and a superseded one, a Markdown chunk),
their links and confidence trajectories, two agent sessions, audit entries and processed
event ids.

Every schema is spelt out here as that layout had it, not taken from lexmem's code (which
describes the current layout), so the folder can be regenerated with the current
libraries and still be the old layout. Ids and times are fixed; vectors come from the
real embedded model, so searches in the migrated folder behave as in a real one.

    .venv/bin/python tests/data/make_layout_v1.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import lancedb
import pyarrow as pa
from lancedb.index import FTS, Bitmap, BTree

HERE = Path(__file__).resolve().parent
OUT = HERE / "layout_v1"
T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)
SHOP = "/home/dev/shop-api"
DIM = 384


def mid(n: int) -> str:
    return f"{n:08d}-0000-4000-8000-{n:012d}"


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


# -- the layout-1 schemas ----------------------------------------------------------------------

TS = pa.timestamp("us", tz="UTC")
S = pa.string()
MEMORIES_V1 = pa.schema(
    [
        pa.field("id", S, nullable=False), pa.field("type", S, nullable=False),
        pa.field("title", S), pa.field("content", S, nullable=False),
        pa.field("vector", pa.list_(pa.float32(), DIM)),
        pa.field("created_at", TS, nullable=False), pa.field("updated_at", TS),
        pa.field("last_accessed_at", TS, nullable=False), pa.field("access_count", pa.int64()),
        pa.field("last_reinforced_at", TS), pa.field("salience", pa.float64()),
        pa.field("importance", pa.float64()), pa.field("pinned", pa.bool_()),
        pa.field("status", S), pa.field("superseded_by", S), pa.field("source", S),
        pa.field("session_id", S), pa.field("conversation_id", S), pa.field("project", S),
        pa.field("user_id", S), pa.field("learning_context", S), pa.field("source_document", S),
        pa.field("chunk_index", pa.int32()), pa.field("total_chunks", pa.int32()),
        pa.field("word_offset", pa.int32()), pa.field("char_offset", pa.int32()),
        pa.field("source_hash", S), pa.field("fingerprint", S), pa.field("capture_mode", S),
        pa.field("confidence", pa.float64()), pa.field("classification_method", S),
        pa.field("word_count", pa.int32()), pa.field("metadata", S),
    ]
)  # fmt: skip
LINKS = pa.schema(
    [pa.field("id", S, nullable=False), pa.field("from_id", S, nullable=False),
     pa.field("to_id", S, nullable=False), pa.field("link_type", S, nullable=False),
     pa.field("strength", pa.float64()), pa.field("created_at", TS)]
)  # fmt: skip
CONFIDENCE = pa.schema(
    [pa.field("id", S, nullable=False), pa.field("memory_id", S, nullable=False),
     pa.field("confidence", pa.float64()), pa.field("recorded_at", TS)]
)  # fmt: skip
SESSIONS = pa.schema(
    [("id", S), ("agent", S), ("project", S), ("started_at", TS), ("last_event_at", TS),
     ("ended_at", TS), ("status", S), ("memory_count", pa.int64()), ("event_count", pa.int64())]
)  # fmt: skip
AUDIT = pa.schema(
    [("id", S), ("timestamp", TS), ("session_id", S), ("candidate_id", S), ("decision", S),
     ("reason", S), ("confidence", pa.float64()), ("rule", S), ("kind", S), ("memory_id", S),
     ("title", S), ("project", S), ("text", S), ("metadata", S)]
)  # fmt: skip
PROCESSED = pa.schema([("event_id", S), ("session_id", S), ("processed_at", TS)])

# -- the data ----------------------------------------------------------------------------------

MEMORIES: list[dict[str, Any]] = [
    dict(n=1, type="semantic", content="The billing service uses PostgreSQL 16; migrations run with Alembic.",
         source="explicit", project=SHOP, pinned=True, salience=0.9, minutes=0, session="cli-explicit",
         method="rule_based", metadata={"tags": ["db"]}),
    dict(n=2, type="semantic", content="Which message broker should billing use for its events?",
         source="agent_response", project=SHOP, minutes=10, session="sess-1", conversation="conv-1"),
    dict(n=3, type="semantic", content="We chose NATS JetStream for the billing events.",
         source="agent_response", project=SHOP, minutes=12, session="sess-1", conversation="conv-1"),
    dict(n=4, type="episodic", content="Load tests showed 40k messages per second on NATS with three nodes.",
         source="hook_event", project=SHOP, minutes=15, session="sess-1", conversation="conv-1",
         access_count=3, learning_context="said while load-testing the broker"),
    dict(n=5, type="procedural", content="To release shop-api: bump the version in pyproject.toml, run make dist, tag v1.2 and push the tag.",
         source="explicit", project=SHOP, minutes=30, session="cli-explicit", importance=0.8),
    dict(n=6, type="episodic", content="On 2025-02-20 the deploy failed because of a missing index on orders.created_at.",
         source="conversation", project=SHOP, minutes=40, status="archived", session="sess-2"),
    dict(n=7, type="procedural", content="Deploys go out on Tuesdays after the stand-up.",
         source="explicit", project=None, minutes=50, status="superseded", superseded_by=mid(8)),
    dict(n=8, type="procedural", content="Deploys go out on Thursdays since April, after the stand-up.",
         source="correction", project=None, minutes=55, confidence=0.95),
    dict(n=9, type="semantic", content="## Caching\nThe catalogue is cached in Redis for ten minutes.",
         source="markdown_chunk", project=SHOP, minutes=60, document="/home/dev/notes/shop.md",
         chunk=(0, 2, 0, 0, "5f1d7a0c")),
]  # fmt: skip

LINK_ROWS = [
    ("l-1", 8, 7, "supersedes", 1.0, 56), ("l-2", 3, 2, "relates_to", 0.6, 13),
    ("l-3", 5, 1, "depends_on", 0.5, 31),
]  # fmt: skip
EXTRA_CONFIDENCE = [
    ("c-extra-1", 3, 0.7, 20),
    ("c-extra-2", 3, 0.9, 25),
    ("c-extra-3", 8, 0.95, 57),
]
SESSION_ROWS = [
    ("sess-1", "claude", SHOP, 9, 16, 20, "completed", 3, 8),
    ("sess-2", "codex", SHOP, 39, 41, None, "active", 1, 2),
]  # fmt: skip
AUDIT_ROWS = [
    ("a-1", 12, "sess-1", "cand-1", "saved", "a decision was made", 0.8, "decision", "decision", 3,
     "We chose NATS JetStream", SHOP, None, {"window": 1}),
    ("a-2", 15, "sess-1", "cand-2", "saved", "a measured result", 0.7, "result", "fact", 4,
     "Load tests showed 40k", SHOP, None, None),
    ("a-3", 16, "sess-1", "cand-3", "skipped", "it held a secret", 0.0, "secret", "", None,
     "", SHOP, None, {"redacted": 1}),
    ("a-4", 41, "sess-2", "cand-4", "skipped", "too short to keep", 0.2, "min_words", "chatter",
     None, "ok thanks", SHOP, "ok thanks", None),
]  # fmt: skip
SETTINGS = """# lexmem settings (the layout before settings were versioned)
model = "lexmem/all-MiniLM-L6-v2-int8"

[search]
default_limit = 7

[capture]
mode = "full"
optout = ["/home/dev/secret-repo"]
"""


def memory_rows(vectors: list[list[float]]) -> list[dict[str, Any]]:
    rows = []
    for m, vector in zip(MEMORIES, vectors, strict=True):
        created = at(m["minutes"])
        chunk = m.get("chunk")
        rows.append({
            "id": mid(m["n"]), "type": m["type"], "title": m["content"].split(";")[0][:60],
            "content": m["content"], "vector": vector, "created_at": created,
            "updated_at": created + timedelta(minutes=1) if m.get("status") else None,
            "last_accessed_at": created + timedelta(hours=1), "access_count": m.get("access_count", 0),
            "last_reinforced_at": None, "salience": m.get("salience", 0.5),
            "importance": m.get("importance", 0.5), "pinned": m.get("pinned", False),
            "status": m.get("status", "active"), "superseded_by": m.get("superseded_by"),
            "source": m["source"], "session_id": m.get("session"),
            "conversation_id": m.get("conversation"), "project": m["project"], "user_id": "local",
            "learning_context": m.get("learning_context"), "source_document": m.get("document"),
            "chunk_index": chunk[0] if chunk else None, "total_chunks": chunk[1] if chunk else None,
            "word_offset": chunk[2] if chunk else None, "char_offset": chunk[3] if chunk else None,
            "source_hash": chunk[4] if chunk else None, "fingerprint": f"fp-{m['n']:02d}",
            "capture_mode": "assist" if m["source"] != "explicit" else None,
            "confidence": m.get("confidence", 1.0),
            "classification_method": m.get("method", "explicit"),
            "word_count": len(m["content"].split()),
            "metadata": json.dumps(m["metadata"], sort_keys=True) if m.get("metadata") else None,
        })  # fmt: skip
    return rows


def embed(texts: list[str]) -> tuple[list[list[float]], str]:
    """Vectors from the real embedded model, and the vector space they belong to."""
    sys.path.insert(0, str(HERE.parent.parent))
    from lexmem.embedder import Embedder
    from lexmem.settings import EmbeddingSettings

    with tempfile.TemporaryDirectory() as models:
        embedder = Embedder(EmbeddingSettings(), Path(models))
        vectors = [[float(x) for x in v] for v in embedder.embed(texts)]
        return vectors, embedder.space_id


def main() -> None:
    shutil.rmtree(OUT, ignore_errors=True)
    store = OUT / "store"
    store.mkdir(parents=True)
    vectors, space = embed([m["content"] for m in MEMORIES])
    db = lancedb.connect(str(store))

    memories = db.create_table(
        "memories_v1", data=pa.Table.from_pylist(memory_rows(vectors), schema=MEMORIES_V1)
    )
    memories.create_index("content", config=FTS(), replace=True)
    for column, kind in (("id", "btree"), ("status", "bitmap"), ("type", "bitmap"),
                         ("source", "bitmap"), ("project", "btree"), ("session_id", "btree")):  # fmt: skip
        memories.create_index(column, config=BTree() if kind == "btree" else Bitmap(), replace=True)

    links = [
        {"id": i, "from_id": mid(a), "to_id": mid(b), "link_type": t, "strength": s,
         "created_at": at(minutes)}
        for i, a, b, t, s, minutes in LINK_ROWS
    ]  # fmt: skip
    db.create_table("links", data=pa.Table.from_pylist(links, schema=LINKS))
    points = [
        {"id": f"c-{m['n']}", "memory_id": mid(m["n"]), "confidence": 1.0, "recorded_at": at(m["minutes"])}
        for m in MEMORIES
    ] + [
        {"id": i, "memory_id": mid(n), "confidence": c, "recorded_at": at(minutes)}
        for i, n, c, minutes in EXTRA_CONFIDENCE
    ]  # fmt: skip
    db.create_table("confidence", data=pa.Table.from_pylist(points, schema=CONFIDENCE))

    sessions = [
        {"id": i, "agent": a, "project": p, "started_at": at(s), "last_event_at": at(last),
         "ended_at": at(end) if end is not None else None, "status": st, "memory_count": mc,
         "event_count": ec}
        for i, a, p, s, last, end, st, mc, ec in SESSION_ROWS
    ]  # fmt: skip
    audit = [
        {"id": i, "timestamp": at(minutes), "session_id": sid, "candidate_id": cand, "decision": d,
         "reason": r, "confidence": c, "rule": rule, "kind": kind, "memory_id": mid(m) if m else None,
         "title": title, "project": p, "text": text,
         "metadata": json.dumps(meta, sort_keys=True) if meta else None}
        for i, minutes, sid, cand, d, r, c, rule, kind, m, title, p, text, meta in AUDIT_ROWS
    ]  # fmt: skip
    processed = [
        {"event_id": f"ev-{k}", "session_id": "sess-1" if k < 8 else "sess-2", "processed_at": at(k)}
        for k in range(10)
    ]  # fmt: skip
    for name, rows, schema, key in (
        ("sessions", sessions, SESSIONS, "id"), ("audit", audit, AUDIT, "session_id"),
        ("processed", processed, PROCESSED, "event_id"),
    ):  # fmt: skip
        table = db.create_table(name, data=pa.Table.from_pylist(rows, schema=schema))
        table.create_index(key, config=BTree(), replace=True)

    meta = {"schema_version": 1, "memories_table": "memories_v1", "dim": DIM,
            "embedding_space": space, "optimized_version": 0}  # fmt: skip
    (store / "meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True), encoding="utf-8")
    (OUT / "settings.toml").write_text(SETTINGS, encoding="utf-8")
    total = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({total / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
