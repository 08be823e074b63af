"""The vector leg's in-memory copy (lexmem.store.flat) against LanceDB's own query:
the same rows in the same order under every filter, kept across access records and
compaction, replaced after any other commit."""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lexmem import Lexmem
from lexmem.models import Memory, MemoryStatus, MemoryType, utcnow
from lexmem.store import flat, lance
from lexmem.store.lance import filter_where
from lexmem.store.protocol import MemoryFilter
from lexmem.store.schema import ROW_COLUMNS

DIM = 384


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype("float32")
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.fixture
def filled(lm: Lexmem) -> Lexmem:
    return fill(lm)


def fill(lm: Lexmem) -> Lexmem:
    """240 memories over three projects, two types, seven sessions and a month, every
    fifth pinned, one archived (the rows the filters below are checked on)."""
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


def _session_read_spy(store: Any, monkeypatch: pytest.MonkeyPatch) -> list[str | None]:
    """Records every session read that goes to LanceDB (``session_rows``)."""
    asked: list[str | None] = []
    real = store.session_rows

    def spying(*args: Any, **kwargs: Any) -> Any:
        asked.append(args[1] if len(args) > 1 else kwargs.get("where"))
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "session_rows", spying)
    return asked


def _lancedb_session_read(
    store: Any, sessions: list[str], flt: MemoryFilter, limit: int, also: list[str]
) -> tuple[list[dict[str, Any]], np.ndarray]:
    table = store.session_rows(sessions, filter_where(flt), [*ROW_COLUMNS, "vector"], limit, also)
    vectors = np.asarray(table.column("vector").to_pylist(), dtype=np.float32)
    return table.drop_columns(["vector"]).to_pylist(), vectors.reshape(table.num_rows, DIM)


@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: filter_where(f) or "all")
def test_the_session_read_from_the_copy_is_lancedb_s(
    filled: Lexmem, flt: MemoryFilter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same rows, same order, same columns and the vectors exactly as stored (one of them
    far from unit length), archived and superseded rows and access records included."""
    store = filled.store
    rows = store.list_memories(MemoryFilter(session_id="s1"), limit=5)
    long = Memory(
        content="a vector three times unit length",
        embedding=[3.0 * float(x) for x in _unit(np.random.default_rng(8), 1)[0]],
        project="shop", session_id="s1", created_at=rows[0].created_at,
    )  # fmt: skip
    store.store(long)
    store.supersede(rows[1].id, long.id)
    store.record_accesses({rows[2].id: 3})
    also = [m.id for m in store.list_memories(MemoryFilter(session_id="s5"), limit=4)]
    sessions = ["s1", "s3", "nowhere"]
    store.nearest_rows(_unit(np.random.default_rng(6), 1)[0], MemoryFilter(), 1, ["id"])
    assert store._flat is not None
    for limit in (1000, 17, 1):
        expected, expected_vectors = _lancedb_session_read(store, sessions, flt, limit, also)
        asked = _session_read_spy(store, monkeypatch)
        table, vectors = store.session_table(
            sessions, flt, ROW_COLUMNS, limit, [*also, "not-an-id"]
        )
        monkeypatch.undo()
        assert asked == []  # served by the copy
        assert table.column_names == list(ROW_COLUMNS)
        assert table.to_pylist() == expected
        assert vectors.dtype == np.float32 and vectors.shape == (len(expected), DIM)
        assert np.array_equal(vectors, expected_vectors)
    everything, _ = _lancedb_session_read(store, sessions, MemoryFilter(status=None), 1000, [])
    assert long.id in {r["id"] for r in everything}


def test_the_session_read_sees_another_process_s_commit(
    filled: Lexmem, embedder: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A commit by another store (here a second core on the same folder, as another
    process would open it) makes the copy stale: once this process looks again (the
    connection's consistency interval), the session read has the new memory."""
    store = filled.store
    store.nearest_rows(_unit(np.random.default_rng(6), 1)[0], MemoryFilter(), 1, ["id"])
    assert store._flat is not None
    other = Lexmem.open(filled.paths.home, embedder=embedder)
    try:
        new = Memory(
            content="said elsewhere", embedding=[float(x) for x in _unit(np.random.default_rng(7), 1)[0]],
            project="shop", session_id="s2",
        )  # fmt: skip
        other.store.store(new)
    finally:
        other.close()
    time.sleep(lance.FLAT_RECHECK_S + 0.2)
    asked = _session_read_spy(store, monkeypatch)
    table, vectors = store.session_table(["s2"], MemoryFilter(), ROW_COLUMNS, 1000)
    assert asked  # the stale copy was not used
    assert new.id in table.column("id").to_pylist()
    assert len(vectors) == table.num_rows


def test_hybrid_search_reads_sessions_from_the_copy(
    lm: Lexmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hybrid search over conversation turns reads their sessions from the copy, and ranks
    exactly as it does when every read goes to LanceDB."""
    from lexmem.models import MemoryContext, MemorySource

    turns = [
        ("s1", "Ana: which database does the shop use?"),
        ("s1", "Ben: PostgreSQL 16, on db-2."),
        ("s1", "Ana: and the backups?"),
        ("s2", "Ben: the blog is built with Hugo."),
        ("s2", "Ana: deployed where?"),
        ("s2", "Ben: Netlify, on every push."),
    ]
    for session, text in turns:
        ctx = MemoryContext(source=MemorySource.CONVERSATION, session_id=session)
        lm.remember(text, context=ctx)
    query = "where is the blog deployed"
    asked = _session_read_spy(lm.store, monkeypatch)
    now = utcnow()  # recency moves with the clock: both searches at one moment
    first = lm.searcher.search(query, record_access=False, now=now)
    assert "context" in first.timings_ms and asked == []
    assert any(h.neighbour_keywords > 0 for h in first.hits)
    # The vector leg keeps the copy; only the session read goes to LanceDB.
    copy = lm.store._flat_copy
    monkeypatch.setattr(
        lm.store, "_flat_copy", lambda *, refresh: copy(refresh=True) if refresh else None
    )
    second = lm.searcher.search(query, record_access=False, now=now)
    assert asked
    assert [(h.memory.id, h.score) for h in first.hits] == [
        (h.memory.id, h.score) for h in second.hits
    ]


def test_a_large_store_is_not_asked_its_version_at_every_search(
    filled: Lexmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Above the copy's size the vector leg goes straight to LanceDB: asking the table its
    version first waits behind the keyword leg's running query. A commit here, or the
    consistency interval, has it looked at again."""
    store = filled.store
    monkeypatch.setattr(lance, "FLAT_MAX_ROWS", 100)
    opened: list[int] = []
    real = store.table

    def counting(name: str = "memories") -> Any:
        opened.append(1)
        return real(name)

    monkeypatch.setattr(store, "table", counting)
    assert store._flat_copy(refresh=True) is None
    assert opened
    opened.clear()
    assert store._flat_copy(refresh=True) is None and store._flat_copy(refresh=False) is None
    assert opened == []
    store.archive(store.list_memories(MemoryFilter(), limit=1)[0].id)
    opened.clear()
    assert store._flat_copy(refresh=True) is None
    assert opened  # this process committed: looked at again
    opened.clear()
    time.sleep(lance.FLAT_RECHECK_S + 0.1)
    assert store._flat_copy(refresh=False) is None
    assert opened
    rows = store.nearest_rows(_unit(np.random.default_rng(2), 1)[0], MemoryFilter(), 3, ["id"])
    assert len(rows) == 3


# -- arrow_rows: the search path's to_pylist -------------------------------------------

_STAMP = pa.timestamp("us", tz="UTC")
# Any instant datetime can hold: the first and last microsecond of years 1 to 9999.
_MICROS = st.integers(min_value=-62_135_596_800_000_000, max_value=253_402_300_799_999_999)


@settings(max_examples=200, deadline=None)
@given(
    chunks=st.lists(st.lists(st.one_of(st.none(), _MICROS), max_size=20), min_size=1, max_size=4),
    other=st.sampled_from([pa.timestamp("us"), pa.timestamp("ms", tz="UTC"), pa.int64()]),
)
def test_arrow_rows_are_arrow_s_own_rows(chunks: list[list[int | None]], other: Any) -> None:
    """Rows with the store's timestamps (with and without nulls, over several chunks),
    a timestamp of another kind and a text: value for value and zone for zone what
    ``to_pylist`` gives, the shortcut taken only for ``timestamp[us, tz=UTC]``."""
    stamps = pa.chunked_array([pa.array(c, type=_STAMP) for c in chunks], type=_STAMP)
    n = len(stamps)
    ints = [None if v is None else v % 10**12 for c in chunks for v in c]
    table = pa.table({
        "at": stamps,
        "other": pa.array(ints, type=pa.int64()).cast(other),
        "text": [None if v is None else str(v) for v in ints],
    })  # fmt: skip
    got, want = flat.arrow_rows(table), table.to_pylist()
    assert got == want
    assert [type(r["at"] and r["at"].tzinfo) for r in got] == [
        type(r["at"] and r["at"].tzinfo) for r in want
    ]
    assert [r["at"] and r["at"].tzinfo.utcoffset(r["at"]) for r in got] == [
        r["at"] and r["at"].tzinfo.utcoffset(r["at"]) for r in want
    ]
    assert len(got) == n


def test_arrow_rows_of_a_table_without_rows_or_columns() -> None:
    empty = pa.table({"at": pa.array([], type=_STAMP)})
    assert flat.arrow_rows(empty) == []
    assert flat.arrow_rows(pa.table({"x": [1, 2]}).select([])) == [{}, {}]


def test_the_search_path_reads_rows_as_arrow_would(filled: Lexmem) -> None:
    """The store's own rows, every column but the vector, through the shortcut."""
    table = filled.store.table().to_arrow().drop_columns(["vector"])
    assert flat.arrow_rows(table) == table.to_pylist()
