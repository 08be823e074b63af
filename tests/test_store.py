"""Seed 004 (MEM-02) on the real store: every operation, criterion and scenario.

The store's conformance suite: every test runs once per storage backend (the ``backend``
fixture, ``tests/store_backends.py``) on a real store in a temporary folder; a test of
LanceDB's own machinery says so (:func:`only`).
"""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from store_backends import only, open_core

from lexmem.api import Lexmem
from lexmem.embedder import Embedder
from lexmem.errors import InvalidInputError, NotFoundError
from lexmem.models import (
    ChunkMetadata,
    Memory,
    MemoryLink,
    MemorySource,
    MemoryStatus,
    MemoryType,
    utcnow,
)
from lexmem.store.lance import MemoryFilter
from lexmem.store.protocol import MemoryBackend


def make(lm: Lexmem, content: str, **fields: object) -> Memory:
    vec = [float(x) for x in lm.embedder.embed_one(content)]
    return Memory(content=content, embedding=vec, **fields)  # type: ignore[arg-type]


@pytest.fixture
def lm(data_home: Path, embedder: Embedder, backend: str) -> Iterator[Lexmem]:
    """A real core on a fresh data folder whose store is of the backend under test."""
    core = open_core(data_home, embedder, backend)
    yield core
    core.close()


@pytest.fixture
def store(lm: Lexmem) -> MemoryBackend:
    return lm.store


# --- Scenario: Store and retrieve memory ------------------------------------------


def test_store_and_retrieve_preserves_every_field_and_the_exact_embedding(
    lm: Lexmem, store: MemoryBackend
) -> None:
    now = utcnow()
    m = make(
        lm,
        "User prefers PostgreSQL",
        type=MemoryType.SEMANTIC,
        title="Database preference",
        created_at=now - timedelta(days=3),
        last_reinforced_at=now - timedelta(days=1),
        salience=0.8,
        importance=0.7,
        pinned=True,
        source=MemorySource.CONVERSATION,
        session_id="sess-1",
        conversation_id="conv-9",
        project="/home/u/shop",
        user_id="alice",
        learning_context="said while choosing a database",
        source_document="notes/db.md",
        chunk=ChunkMetadata("notes/db.md", 1, 3, 150, 900, "ab" * 32),
        capture_mode="assist",
        confidence=0.9,
        metadata={"agent": "claude", "turn": 4},
    )
    store.store(m)
    got = store.get(m.id)
    assert got.embedding == m.embedding  # preserved exactly (float32 in, float32 out)
    for field in (
        "id", "type", "title", "content", "created_at", "last_accessed_at", "access_count",
        "last_reinforced_at", "salience", "importance", "pinned", "status", "superseded_by",
        "source", "session_id", "conversation_id", "project", "user_id", "learning_context",
        "source_document", "chunk", "fingerprint", "capture_mode", "confidence", "word_count", "metadata",
    ):  # fmt: skip
        assert getattr(got, field) == getattr(m, field), field


def test_get_unknown_id_raises_not_found(store: MemoryBackend) -> None:
    with pytest.raises(NotFoundError):
        store.get("00000000-0000-0000-0000-000000000000")
    assert store.get_optional("00000000-0000-0000-0000-000000000000") is None


def test_storing_the_same_id_twice_is_refused(lm: Lexmem, store: MemoryBackend) -> None:
    m = make(lm, "A fact")
    store.store(m)
    with pytest.raises(InvalidInputError, match="already exists"):
        store.store(m)
    assert store.count() == 1


def test_store_refuses_a_vector_of_the_wrong_size(store: MemoryBackend) -> None:
    with pytest.raises(InvalidInputError, match="384"):
        store.store(Memory(content="x", embedding=[0.1, 0.2]))
    with pytest.raises(InvalidInputError, match="no embedding"):
        store.store(Memory(content="x"))


# --- Scenario: Record access updates temporal metadata ----------------------------


def test_record_access_increments_count_and_updates_last_accessed(
    lm: Lexmem, store: MemoryBackend
) -> None:
    m = make(lm, "The API listens on port 8080", last_accessed_at=utcnow() - timedelta(days=10))
    store.store(m)
    assert store.get(m.id).access_count == 0
    before = utcnow()
    store.record_access(m.id)
    got = store.get(m.id)
    assert got.access_count == 1
    assert got.last_accessed_at >= before - timedelta(seconds=1)
    store.record_access(m.id)
    assert store.get(m.id).access_count == 2
    with pytest.raises(NotFoundError):
        store.record_access("00000000-0000-0000-0000-000000000000")


# --- Scenario: Archive memory ------------------------------------------------------


def test_archive_sets_status_and_leaves_active_queries(lm: Lexmem, store: MemoryBackend) -> None:
    a = make(lm, "Old build server is jenkins-1")
    b = make(lm, "The build server is jenkins-2")
    store.store_many([a, b])
    store.archive(a.id)
    assert store.get(a.id).status == MemoryStatus.ARCHIVED
    active = [m.id for m in store.list_memories(MemoryFilter())]
    assert active == [b.id]
    assert a.id not in [m.id for m in store.get_by_type(MemoryType.SEMANTIC, "local")]
    assert a.id not in [h.memory.id for h in lm.search("build server jenkins").hits]
    store.restore(a.id)
    assert store.get(a.id).status == MemoryStatus.ACTIVE


# --- Supersede ---------------------------------------------------------------------


def test_supersede_links_old_to_replacement_and_chain_is_navigable_both_ways(
    lm: Lexmem, store: MemoryBackend
) -> None:
    v1, v2, v3 = (make(lm, f"The staging URL is staging{i}.example.com") for i in (1, 2, 3))
    store.store_many([v1, v2, v3])
    store.supersede(v1.id, v2.id)
    store.supersede(v2.id, v3.id)
    old = store.get(v1.id)
    assert old.status == MemoryStatus.SUPERSEDED and old.superseded_by == v2.id
    assert [m.id for m in store.supersede_chain(v1.id)] == [v2.id, v3.id]
    assert [m.id for m in store.supersede_chain(v3.id, forward=False)] == [v2.id, v1.id]
    assert any(
        lk.link_type == "supersedes" and lk.to_id == v1.id for lk in store.get_links_from(v2.id)
    )
    hits = [h.memory.id for h in lm.search("staging URL").hits]
    assert hits == [v3.id]
    with pytest.raises(InvalidInputError, match="cycle"):
        store.supersede(v3.id, v1.id)
    with pytest.raises(InvalidInputError):
        store.supersede(v3.id, v3.id)


# --- Links -------------------------------------------------------------------------


def test_links_are_unique_per_from_to_type(lm: Lexmem, store: MemoryBackend) -> None:
    a, b = make(lm, "Service A calls service B"), make(lm, "Service B owns the orders table")
    store.store_many([a, b])
    store.store_link(MemoryLink(a.id, b.id, "depends_on", 0.4))
    store.store_link(
        MemoryLink(a.id, b.id, "depends_on", 0.9)
    )  # same triple: updated, not duplicated
    store.store_link(MemoryLink(a.id, b.id, "relates_to", 0.5))
    links = store.get_links_from(a.id)
    assert sorted((lk.link_type, lk.strength) for lk in links) == [
        ("depends_on", 0.9),
        ("relates_to", 0.5),
    ]
    assert [lk.from_id for lk in store.get_links_to(b.id)] == [a.id, a.id]
    with pytest.raises(NotFoundError):
        store.store_link(MemoryLink(a.id, "00000000-0000-0000-0000-000000000000", "x"))
    with pytest.raises(InvalidInputError):
        store.store_link(MemoryLink(a.id, a.id, "self"))


# --- Confidence trajectory ---------------------------------------------------------


def test_confidence_trajectory_is_kept_in_order(lm: Lexmem, store: MemoryBackend) -> None:
    m = make(lm, "Tests run with pytest", confidence=0.6)
    store.store(m)
    for value in (0.7, 0.85, 0.5):
        store.record_confidence(m.id, value)
    history = [p.confidence for p in store.confidence_history(m.id)]
    assert history == [0.6, 0.7, 0.85, 0.5]
    assert store.get(m.id).confidence == 0.5
    with pytest.raises(InvalidInputError):
        store.record_confidence(m.id, 1.5)


# --- Scenario: Salience decay ------------------------------------------------------


def test_decay_multiplies_all_salience_values(lm: Lexmem, store: MemoryBackend) -> None:
    vec = [float(x) for x in lm.embedder.embed_one("memory")]
    memories = [
        Memory(content=f"memory number {i}", embedding=vec, salience=1.0) for i in range(100)
    ]
    store.store_many(memories)
    assert store.decay_all(0.9) == 100
    assert {round(m.salience, 6) for m in store.list_memories(limit=None)} == {0.9}


def test_decay_skips_pinned_archived_and_below_floor(lm: Lexmem, store: MemoryBackend) -> None:
    pinned = make(lm, "Pinned", salience=1.0, pinned=True)
    archived = make(lm, "Archived", salience=1.0)
    floor = make(lm, "Faded", salience=0.005)
    normal = make(lm, "Normal", salience=0.5)
    store.store_many([pinned, archived, floor, normal])
    store.archive(archived.id)
    assert store.decay_all(0.5) == 1
    assert store.get(pinned.id).salience == 1.0
    assert store.get(archived.id).salience == 1.0
    assert store.get(floor.id).salience == 0.005
    assert store.get(normal.id).salience == 0.25
    with pytest.raises(InvalidInputError):
        store.decay_all(0)


# --- The rest of a memory's life ------------------------------------------------------


def test_pin_edit_salience_and_reinforce(lm: Lexmem, store: MemoryBackend) -> None:
    m = make(lm, "Use ruff for linting")
    store.store(m)
    store.set_pinned(m.id, True)
    assert store.get(m.id).pinned
    store.update_salience(m.id, 0.75)
    assert store.get(m.id).salience == 0.75
    r = store.reinforce(m.id, 0.2)
    assert r.salience == pytest.approx(0.8)
    assert store.get(m.id).last_reinforced_at is not None
    store.edit(m.id, title="Linting")
    assert store.get(m.id).title == "Linting"
    with pytest.raises(InvalidInputError):
        store.edit(m.id, status="archived")
    with pytest.raises(InvalidInputError):
        store.update_salience(m.id, 2.0)


def test_hard_delete_removes_row_links_and_history(lm: Lexmem, store: MemoryBackend) -> None:
    a, b, c = make(lm, "Alpha fact"), make(lm, "Beta fact"), make(lm, "Gamma fact")
    store.store_many([a, b, c])
    store.store_link(MemoryLink(a.id, b.id, "relates_to"))
    store.store_link(MemoryLink(c.id, a.id, "relates_to"))
    store.record_confidence(a.id, 0.3)
    store.supersede(c.id, a.id)
    store.delete(a.id)
    assert store.get_optional(a.id) is None
    assert store.get_links_from(b.id) == [] and store.get_links_to(b.id) == []
    assert all(a.id not in (lk.from_id, lk.to_id) for lk in store.all_links())
    assert store.confidence_history(a.id) == []
    assert store.get(c.id).superseded_by is None  # no dangling pointer to a forgotten memory
    with pytest.raises(NotFoundError):
        store.delete(a.id)


def test_list_filters_sorting_paging_and_count(lm: Lexmem, store: MemoryBackend) -> None:
    base = utcnow() - timedelta(days=30)
    items = []
    for i in range(12):
        items.append(
            make(
                lm,
                f"fact {i}",
                project="p1" if i % 2 else "p2",
                type=MemoryType.PROCEDURAL if i % 3 == 0 else MemoryType.SEMANTIC,
                created_at=base + timedelta(days=i),
                salience=i / 20,
                source=MemorySource.CORRECTION if i == 5 else MemorySource.EXPLICIT,
            )
        )
    store.store_many(items)
    newest_first = [m.content for m in store.list_memories(limit=3)]
    assert newest_first == ["fact 11", "fact 10", "fact 9"]
    assert [m.content for m in store.list_memories(limit=3, offset=3)] == [
        "fact 8",
        "fact 7",
        "fact 6",
    ]
    assert store.count(MemoryFilter(project="p1")) == 6
    assert store.count(MemoryFilter(type=MemoryType.PROCEDURAL)) == 4
    assert [
        m.content for m in store.list_memories(MemoryFilter(source=MemorySource.CORRECTION))
    ] == ["fact 5"]
    after = store.list_memories(MemoryFilter(created_after=base + timedelta(days=10)), limit=None)
    assert {m.content for m in after} == {"fact 10", "fact 11"}
    by_sal = store.get_by_type(MemoryType.SEMANTIC, "local", limit=2)
    assert [m.content for m in by_sal] == ["fact 11", "fact 10"]
    with pytest.raises(InvalidInputError):
        store.list_memories(sort="nonsense")


def test_resolve_id_by_unique_prefix(lm: Lexmem, store: MemoryBackend) -> None:
    m = make(lm, "prefix me")
    store.store(m)
    assert store.resolve_id(m.id[:8]) == m.id
    assert store.resolve_id(m.id) == m.id
    with pytest.raises(InvalidInputError):
        store.resolve_id("not an id; DROP")
    with pytest.raises(NotFoundError):
        store.resolve_id("ffffffff")


def test_quotes_in_values_are_safe_in_filters(lm: Lexmem, store: MemoryBackend) -> None:
    m = make(lm, "O'Reilly's book", project="it's a project")
    store.store(m)
    assert store.count(MemoryFilter(project="it's a project")) == 1
    assert store.count(MemoryFilter(project="x' OR '1'='1")) == 0


# --- Indices and growth ------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:optimize")
def test_full_text_index_exists_and_versions_are_pruned(
    lm: Lexmem, store: MemoryBackend, backend: str
) -> None:
    only(backend, "lance")  # LanceDB's FTS index and table versions; a server keeps neither
    indices = store.table().list_indices()
    assert any(i.index_type == "FTS" for i in indices)
    m = make(lm, "version growth")
    store.store(m)
    for _ in range(70):
        store.record_access(m.id)
    # optimize ran after 64 commits; versions older than the keep window are pruned on the next run
    import lexmem.store.lance as store_mod

    old = store_mod.KEEP_VERSIONS_FOR
    store_mod.KEEP_VERSIONS_FOR = timedelta(0)
    try:
        store.optimize()
    finally:
        store_mod.KEEP_VERSIONS_FOR = old
    assert store.versions_on_disk() <= store_mod.KEEP_VERSIONS + 3  # the newest few stay
    assert store.get(m.id).access_count == 70


def test_vector_index_is_built_once_the_table_is_large(lm: Lexmem, backend: str) -> None:
    only(backend, "lance")  # IVF-PQ built at a size; the HNSW index always exists on a server
    import numpy as np

    lm.store.settings.vector_index_min_rows = 300
    rng = np.random.default_rng(7)
    vecs = rng.standard_normal((400, 384)).astype("float32")
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    lm.store.store_many(
        [Memory(content=f"row {i}", embedding=[float(x) for x in v]) for i, v in enumerate(vecs)]
    )
    assert not lm.store.has_vector_index()
    lm.store.optimize()
    assert lm.store.has_vector_index()
    # The indexed vector leg still finds an exact match first.
    target = lm.store.list_memories(limit=1)[0]
    row = lm.store.get(target.id)
    query = lm.searcher.vector_query(
        np.asarray(row.embedding, dtype="float32"), "status = 'active'", 5
    )
    assert "ANNSubIndex" in query.explain_plan()  # seed 004: similarity queries use the index
    assert query.to_list()[0]["id"] == target.id


def _writer(home: str, n: int, tag: str, backend: str) -> None:
    core = Lexmem.open(home, backend=backend)
    vec = [0.05] * 384
    for i in range(n):
        core.store.store(Memory(content=f"{tag} {i}", embedding=vec))
    core.close()


def test_writers_in_several_processes_never_lose_a_commit(
    lm: Lexmem, data_home: Path, backend: str
) -> None:
    ctx = mp.get_context("spawn")  # LanceDB is not fork-safe
    procs = [
        ctx.Process(target=_writer, args=(str(data_home), 15, f"writer{k}", backend))
        for k in range(3)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    lm.store.refresh()
    assert lm.store.count() == 45


def test_superseding_an_already_superseded_memory_is_refused(
    lm: Lexmem, store: MemoryBackend
) -> None:
    old, new, newest = (make(lm, f"The release branch is release-{i}") for i in (1, 2, 3))
    store.store_many([old, new, newest])
    store.supersede(old.id, new.id)
    with pytest.raises(InvalidInputError, match="already superseded"):
        store.supersede(old.id, newest.id)
    store.supersede(new.id, newest.id)
    assert [m.id for m in store.supersede_chain(old.id)] == [new.id, newest.id]


def test_api_link_types_have_one_spelling_and_noop_edits_change_nothing(lm: Lexmem) -> None:
    a = lm.remember("Service A").memories[0]
    b = lm.remember("Service B").memories[0]
    lm.link(a.id, b.id, "Depends On")
    lm.link(a.id, b.id, "depends-on")
    assert [lk.link_type for lk in lm.store.get_links_from(a.id)] == ["depends_on"]
    with pytest.raises(InvalidInputError):
        lm.link(a.id, b.id, " - ")
    before = lm.get(a.id)
    assert not lm.edit(a.id, title=before.title, type=before.type, salience=before.salience)
    assert lm.get(a.id).updated_at == before.updated_at


# --- The session context column ----------------------------------------------


def _contexts(store: MemoryBackend) -> dict[str, str | None]:
    rows = store.arrow_table("memories", ["id", "context"]).to_pylist()
    return {r["id"]: r["context"] for r in rows}


def _said(lm: Lexmem, text: str, at: int, session: str = "s1", **kw: object) -> Memory:
    base = utcnow() - timedelta(hours=1)
    kw.setdefault("source", MemorySource.CONVERSATION)
    return make(lm, text, session_id=session, created_at=base + timedelta(minutes=at), **kw)


def test_context_is_the_neighbouring_conversation_memories_and_kept_current(
    lm: Lexmem, store: MemoryBackend
) -> None:
    a, b = _said(lm, "Which broker for billing?", 0), _said(lm, "NATS JetStream.", 2)
    store.store_many([b, a])  # a batch in any order
    ctx = _contexts(store)
    assert ctx[a.id] == b.content and ctx[b.id] == a.content
    c = _said(lm, "It ran on three nodes.", 4)
    store.store(c)  # the first of its batch: its neighbour is read and updated
    note = _said(lm, "A note kept on purpose", 5, source=MemorySource.EXPLICIT)
    other = _said(lm, "Elsewhere entirely", 6, session="s2")
    store.store_many([note, other])
    ctx = _contexts(store)
    assert ctx[a.id] == b.content and ctx[c.id] == b.content
    assert ctx[b.id] == f"{a.content}\n{c.content}"  # the one before, then the one after
    assert ctx[note.id] is None and ctx[other.id] is None  # not a conversation; alone

    late = _said(lm, "We load-tested it first.", 3)  # captured late, said between b and c
    store.store(late)
    ctx = _contexts(store)
    assert ctx[late.id] == f"{b.content}\n{c.content}" and ctx[c.id] == late.content
    assert ctx[b.id] == f"{a.content}\n{late.content}"

    store.edit(late.id, content="We load-tested it for a week.")
    ctx = _contexts(store)
    assert ctx[c.id] == "We load-tested it for a week."
    assert ctx[b.id] == f"{a.content}\nWe load-tested it for a week."
    assert ctx[late.id] == f"{b.content}\n{c.content}"  # an edit keeps the row's own context

    store.delete(late.id)  # forgetting a memory takes its text out of its neighbours too
    ctx = _contexts(store)
    assert ctx[c.id] == b.content and ctx[b.id] == f"{a.content}\n{c.content}"
    assert not any("load-tested" in (v or "") for v in ctx.values())


def test_a_store_from_before_the_context_column_is_migrated_on_open(
    lm: Lexmem, data_home: Path, backend: str
) -> None:
    only(backend, "lance")  # the local layout's version 1; a server migrates by its schema steps
    question = _said(lm, "Which message broker should the billing service use?", 0)
    answer = _said(lm, "We settled on NATS JetStream after the load test.", 1)
    lm.store.store_many([question, answer])
    table = lm.store.table()
    table.drop_index("context_idx")
    table.drop_columns(["context"])  # the old schema
    lm.store.write_meta(dict(lm.store.read_meta(), schema_version=1))  # and its layout number
    lm.close()

    again = open_core(data_home, lm.embedder, backend)
    try:
        table = again.store.table()
        assert "context" in table.schema.names
        assert any(i.columns == ["context"] for i in table.list_indices())
        ctx = _contexts(again.store)
        assert ctx[answer.id] == question.content and ctx[question.id] == answer.content
        hits = again.search("billing message broker", mode="bm25", record_access=False).hits
        assert [h.memory.id for h in hits] == [question.id, answer.id]
    finally:
        again.close()


def test_memories_left_without_a_confidence_point_get_their_first_back(
    lm: Lexmem, store: MemoryBackend, backend: str
) -> None:
    """A process killed between store_many's two commits leaves memories with no
    history; add_missing_confidence (run when the service starts) mends exactly those."""
    a, b = make(lm, "Billing uses NATS"), make(lm, "Deploys on Tuesdays")
    store.store_many([a, b])
    # The kill is staged in the backend's own table.
    if backend == "postgres":
        with store.db.tx() as cur:  # type: ignore[attr-defined]
            cur.execute(
                "DELETE FROM lexmem.memory_confidence_history WHERE memory_id = %s", (b.id,)
            )
    else:
        store.table("confidence").delete(f"memory_id = '{b.id}'")  # type: ignore[attr-defined]
    assert store.confidence_history(b.id) == []
    assert store.add_missing_confidence() == 1
    (point,) = store.confidence_history(b.id)
    assert point.confidence == pytest.approx(b.confidence)
    assert len(store.confidence_history(a.id)) == 1  # untouched
    assert store.add_missing_confidence() == 0


# --- Named reads: what the rest of lexmem asks of the store, by name ----------------


def test_project_names_ids_in_projects_and_ids_superseded_by(
    lm: Lexmem, store: MemoryBackend
) -> None:
    shop = make(lm, "Shop deploys on Fridays", project="/w/shop")
    quoted = make(lm, "Quoted project", project="/w/it's")
    general = make(lm, "Prefers short answers")
    newer = make(lm, "Shop deploys on Tuesdays", project="/w/shop")
    store.store_many([shop, quoted, general, newer])
    store.supersede(shop.id, newer.id)
    assert store.project_names() == ["/w/it's", "/w/shop"]
    assert sorted(store.ids_in_projects(["/w/shop"])) == sorted([shop.id, newer.id])
    assert store.ids_in_projects(["/w/it's", "/w/none"]) == [quoted.id]
    assert store.ids_in_projects([]) == []
    assert store.ids_superseded_by(newer.id) == [shop.id]
    assert store.ids_superseded_by(shop.id) == []


def test_recent_fingerprint_finds_an_active_repeat_within_the_window(
    lm: Lexmem, store: MemoryBackend
) -> None:
    m = make(lm, "The staging database is on port 5433", created_at=utcnow() - timedelta(days=2))
    store.store(m)
    assert store.recent_fingerprint(m.fingerprint, utcnow() - timedelta(days=30)) == m.id
    assert store.recent_fingerprint(m.fingerprint, utcnow() - timedelta(days=1)) is None
    assert store.recent_fingerprint("no such fingerprint", utcnow() - timedelta(days=30)) is None
    store.archive(m.id)
    assert store.recent_fingerprint(m.fingerprint, utcnow() - timedelta(days=30)) is None


def test_nearest_ranks_by_cosine_within_the_filter(lm: Lexmem, store: MemoryBackend) -> None:
    a = make(lm, "The billing service publishes to NATS JetStream", project="/w/shop")
    b = make(lm, "Gardening tips for tomatoes", project="/w/shop")
    c = make(lm, "The billing service publishes to NATS JetStream", project="/w/other")
    store.store_many([a, b, c])
    assert a.embedding is not None
    hits = store.nearest(a.embedding, MemoryFilter(project="/w/shop"), 2)
    assert [h.id for h in hits] == [a.id, b.id]
    assert hits[0].similarity == pytest.approx(1.0, abs=1e-3)
    assert hits[0].similarity > hits[1].similarity
    assert hits[0].content == a.content
    assert {h.id for h in store.nearest(a.embedding, MemoryFilter(), 3)} == {a.id, b.id, c.id}


def test_archived_before_is_what_retention_forgets(lm: Lexmem, store: MemoryBackend) -> None:
    old, pinned, active = (make(lm, f"retention case {i}") for i in range(3))
    store.store_many([old, pinned, active])
    store.archive(old.id)
    store.archive(pinned.id)
    store.set_pinned(pinned.id, True)
    assert store.archived_before(utcnow() + timedelta(days=1)) == [old.id]
    assert store.archived_before(utcnow() - timedelta(days=1)) == []


def test_digest_columns_hold_the_project_and_the_general_memories(
    lm: Lexmem, store: MemoryBackend
) -> None:
    import numpy as np

    own = make(lm, "Shop uses PostgreSQL", project="/w/shop", pinned=True, salience=0.9)
    general = make(lm, "Prefers short answers", source_document="notes/me.md")
    other = make(lm, "Other project", project="/w/other")
    gone = make(lm, "Archived one", project="/w/shop")
    store.store_many([own, general, other, gone])
    store.archive(gone.id)
    store.record_access(general.id)

    cols = store.digest_columns("/w/shop")
    assert len(cols) == 2
    keys = cols.keys(np.arange(len(cols)))
    at = {mid: k for k, (mid, _, _) in enumerate(keys)}
    assert set(at) == {own.id, general.id}
    assert keys[at[general.id]] == (general.id, general.fingerprint, "notes/me.md")
    assert bool(cols.pinned[at[own.id]]) and not bool(cols.pinned[at[general.id]])
    assert bool(cols.general[at[general.id]]) and not bool(cols.general[at[own.id]])
    assert cols.salience[at[own.id]] == pytest.approx(0.9)
    assert cols.access_count[at[general.id]] == 1
    assert np.isnan(cols.last_reinforced_us[at[own.id]])
    assert cols.created_us[at[own.id]] == pytest.approx(own.created_at.timestamp() * 1e6, abs=1)

    only_general = store.digest_columns(None)
    assert [k[0] for k in only_general.keys([0])] == [general.id] and len(only_general) == 1


def test_arrow_table_is_a_whole_table_for_the_lens(lm: Lexmem, store: MemoryBackend) -> None:
    a, b = make(lm, "Service A"), make(lm, "Service B")
    store.store_many([a, b])
    store.store_link(MemoryLink(a.id, b.id, "depends_on", 0.5))
    assert store.arrow_table("memories", ["id"]).column_names == ["id"]
    assert sorted(store.arrow_table("memories", ["id"]).column("id").to_pylist()) == sorted(
        [a.id, b.id]
    )
    assert store.arrow_table("links").num_rows == 1
    assert {"memories", "links", "confidence"} <= {
        n if not n.startswith("memories_v") else "memories" for n in store.list_tables()
    }


def test_a_commit_under_way_when_the_data_folder_is_deleted_leaves_nothing_behind(
    lm: Lexmem, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """The folder deleted after the store's check and before its commit landed: LanceDB
    wrote the commit's table files back into a folder of its own making (a fresh-clone CI
    run found `store/memories_v1.lance/_versions` in a deleted data folder). The store
    takes that folder away again and says the store is gone."""
    only(backend, "lance")  # a server's tables are not in the data folder
    import shutil
    from contextlib import contextmanager

    import lexmem.store.lance as lance_module
    from lexmem.errors import StoreIOError

    (m,) = lm.remember("The staging database listens on 5433").memories
    home = lm.paths.home
    real_umask = lance_module.secure_umask

    @contextmanager
    def deleted_meanwhile():  # type: ignore[no-untyped-def]
        shutil.rmtree(home)  # as a person deletes it, between the check and the commit
        with real_umask():
            yield

    monkeypatch.setattr(lance_module, "secure_umask", deleted_meanwhile)
    with pytest.raises(StoreIOError, match="the store is gone"):
        lm.store.set_pinned(m.id, True)
    assert not home.exists()


def test_a_recreated_folder_with_someone_elses_files_is_left_alone(
    lm: Lexmem, monkeypatch: pytest.MonkeyPatch, backend: str
) -> None:
    """Only what the commit itself wrote is taken away: a data folder that was put back
    meanwhile (a restore, a person's own files) stays as it is."""
    only(backend, "lance")  # a server's tables are not in the data folder
    import shutil
    from contextlib import contextmanager

    import lexmem.store.lance as lance_module
    from lexmem.errors import StoreIOError

    (m,) = lm.remember("The staging database listens on 5433").memories
    home = lm.paths.home
    real_umask = lance_module.secure_umask

    @contextmanager
    def replaced_meanwhile():  # type: ignore[no-untyped-def]
        shutil.rmtree(home)
        home.mkdir()
        (home / "notes.md").write_text("mine")
        with real_umask():
            yield

    monkeypatch.setattr(lance_module, "secure_umask", replaced_meanwhile)
    with pytest.raises(StoreIOError, match="the store is gone"):
        lm.store.set_pinned(m.id, True)
    assert (home / "notes.md").read_text() == "mine"
