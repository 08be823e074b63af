"""The vector leg's in-memory copy (lexmem.store.flat) against LanceDB's own query:
the same rows in the same order under every filter, kept across access records and
compaction, replaced after any other commit."""

from __future__ import annotations

from datetime import timedelta

import numpy as np
import pytest

from lexmem import Lexmem
from lexmem.models import Memory, MemoryStatus, MemoryType, utcnow
from lexmem.store.lance import filter_where
from lexmem.store.protocol import MemoryFilter

DIM = 384


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype("float32")
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def filled(lm: Lexmem) -> Lexmem:
    rng = np.random.default_rng(11)
    vecs = _unit(rng, 240)
    start = utcnow() - timedelta(days=30)
    projects = ["shop", "blog", None]
    memories = [
        Memory(
            content=f"row {i}",
            embedding=[float(x) for x in v],
            project=projects[i % 3],
            type=MemoryType.PROCEDURAL if i % 4 == 0 else MemoryType.SEMANTIC,
            pinned=i % 5 == 0,
            session_id=f"s{i % 7}",
            created_at=start + timedelta(hours=3 * i),
        )
        for i, v in enumerate(vecs)
    ]
    lm.store.store_many(memories)
    lm.store.archive(memories[3].id)
    return lm


FILTERS = [
    MemoryFilter(),
    MemoryFilter(status=MemoryStatus.ACTIVE),
    MemoryFilter(project="shop"),
    MemoryFilter(exclude_projects=("shop",)),
    MemoryFilter(exclude_projects=("shop", "blog")),
    MemoryFilter(type=MemoryType.PROCEDURAL, pinned=True),
    MemoryFilter(pinned=False, session_id="s3"),
    MemoryFilter(created_after=utcnow() - timedelta(days=20)),
    MemoryFilter(created_before=utcnow() - timedelta(days=25), status=MemoryStatus.ACTIVE),
    MemoryFilter(project="nowhere"),
]


@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: filter_where(f) or "all")
def test_the_copy_answers_as_lancedb_does(filled: Lexmem, flt: MemoryFilter) -> None:
    store = filled.store
    query = _unit(np.random.default_rng(5), 1)[0]
    columns = ["id", "content", "project", "salience"]
    expected = store.vector_query(query, filter_where(flt), 25, columns).to_list()
    got = store.nearest_rows(query, flt, 25, columns)
    assert store._flat is not None  # served from memory, not by the query above
    assert [r["id"] for r in got] == [r["id"] for r in expected]
    for a, b in zip(got, expected, strict=True):
        assert a["_distance"] == pytest.approx(b["_distance"], abs=1e-5)
        assert {k: a[k] for k in columns} == {k: b[k] for k in columns}


def test_the_copy_outlives_access_records_and_compaction_but_not_a_change(
    filled: Lexmem,
) -> None:
    store = filled.store
    query = _unit(np.random.default_rng(9), 1)[0]
    flt = MemoryFilter(status=MemoryStatus.ACTIVE)
    first = store.nearest_rows(query, flt, 5, ["id"])
    copy = store._flat
    assert copy is not None
    store.record_accesses({r["id"]: 2 for r in first})
    store.record_access_many([first[0]["id"]])
    store.optimize(build_vector_index=False)
    assert store._flat is not None and store._flat.unit is copy.unit  # not read again
    assert store._flat.version == store.table().version
    # A memory that is the query itself: a new commit, a new copy that has it.
    new = Memory(content="the query", embedding=[float(x) for x in query])
    store.store(new)
    assert store.nearest_rows(query, flt, 1, ["id"])[0]["id"] == new.id
    assert store._flat is not None and store._flat.unit is not copy.unit
    # Archived: gone from an active-only leg at once.
    store.archive(new.id)
    assert new.id not in {r["id"] for r in store.nearest_rows(query, flt, 5, ["id"])}


def test_access_records_reach_the_copy_as_the_store_has_them(filled: Lexmem) -> None:
    store = filled.store
    query = _unit(np.random.default_rng(3), 1)[0]
    top = [r["id"] for r in store.nearest_rows(query, MemoryFilter(), 3, ["id"])]
    store.record_accesses({top[0]: 4, top[1]: 1})
    store.record_access_many([top[0]])
    copy = store._flat
    assert copy is not None and copy.version == store.table().version
    columns = ["id", "access_count", "last_accessed_at"]
    rows = store.nearest_rows(query, MemoryFilter(), 3, columns)
    on_disk = store.vector_query(query, None, 3, columns).to_list()
    assert rows == [{**r, "_distance": rows[n]["_distance"]} for n, r in enumerate(on_disk)]
    assert rows[0]["access_count"] == 5 and rows[1]["access_count"] == 1


def test_whole_memories_from_the_copy_are_the_stored_ones(
    filled: Lexmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = filled.store
    ids = [m.id for m in store.list_memories(MemoryFilter(), limit=30)]
    store.record_accesses({ids[0]: 3})
    store.nearest_rows(_unit(np.random.default_rng(1), 1)[0], MemoryFilter(), 1, ["id"])
    assert store._flat is not None
    wanted = [ids[5], "not-an-id", ids[0], ids[29]]
    from_copy = store.get_many(wanted)
    assert len(from_copy) == 3
    monkeypatch.setattr(store, "_flat_copy", lambda refresh: None)
    from_lance = store.get_many(wanted)
    assert from_copy == from_lance


def test_capture_never_pays_for_a_new_copy(filled: Lexmem) -> None:
    """The exact-repeat check during capture uses a copy that is current, and LanceDB
    otherwise: after each captured memory a copy would be read again for one query."""
    store = filled.store
    query = _unit(np.random.default_rng(4), 1)[0]
    store.store(Memory(content="fresh", embedding=[float(x) for x in query]))
    assert store._flat is None or store._flat.version != store.table().version
    hits = store.nearest([float(x) for x in query], MemoryFilter(), 1)
    assert hits[0].content == "fresh"
    assert store._flat is None or store._flat.version != store.table().version


def test_a_large_store_is_left_to_lancedb(filled: Lexmem, monkeypatch: pytest.MonkeyPatch) -> None:
    import lexmem.store.lance as lance

    monkeypatch.setattr(lance, "FLAT_MAX_ROWS", 100)
    query = _unit(np.random.default_rng(2), 1)[0]
    rows = filled.store.nearest_rows(query, MemoryFilter(), 3, ["id"])
    assert len(rows) == 3 and filled.store._flat is None


def test_hybrid_search_is_the_same_with_and_without_the_copy(
    lm: Lexmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    import lexmem.store.lance as lance

    for text in (
        "The shop's database is PostgreSQL 16 on db-2.",
        "Releases go out with make ship on Fridays.",
        "The blog is built with Hugo and deployed to Netlify.",
        "Ana prefers tabs over spaces in the shop's Go code.",
        "The billing ledger is reconciled every night at 02:00.",
    ):
        lm.remember(text)
    flat = [h.memory.id for h in lm.search("which database does the shop use").hits]
    assert lm.store._flat is not None
    monkeypatch.setattr(lance, "FLAT_MAX_ROWS", 0)
    lm.store._flat = None
    lance_only = [h.memory.id for h in lm.search("which database does the shop use").hits]
    assert lm.store._flat is None
    assert flat == lance_only


def test_a_forgotten_memory_leaves_the_copy_at_once(filled: Lexmem) -> None:
    """Forgetting is a commit like any other but access records: the copy that held the
    memory's text is dropped by the commit, not at the next search."""
    store = filled.store
    secret = Memory(content="the vault code is 4711", embedding=[1.0] + [0.0] * (DIM - 1))
    store.store(secret)
    store.nearest_rows(secret.embedding, MemoryFilter(), 1, ["id"])
    assert store._flat is not None and secret.id in store._flat.position
    filled.forget(secret.id)
    assert store._flat is None


def test_asking_the_copy_for_ids_it_does_not_have_is_no_error(filled: Lexmem) -> None:
    """A pull asks which of the team's ids are here already: none of them, at first."""
    filled.search("row 3", mode="vector", record_access=False)  # the copy is built
    assert filled.store.get_many(["not-here", "nor-this"]) == []
    known = filled.list_memories(limit=1)[0].id
    assert [m.id for m in filled.store.get_many(["not-here", known])] == [known]
