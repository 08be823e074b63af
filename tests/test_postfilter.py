"""A search's filter applied to the vector query's rows rather than inside the query
(``MemoryStore.filtered_rows``): the same rows in the same order as LanceDB's filtered
query, under every filter, at every depth, with the share of admitted rows counted
right or wrong; the filter moves out of the query only when it admits most rows. And
the hits' full rows read by the row ids the query returned, stale ones included.

The vector index is not built for 240 rows: LanceDB's exact search is what both ways
are compared on, so they must agree row for row."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_flat import FILTERS as FLAT_FILTERS
from test_flat import _unit, fill

from lexmem import Lexmem
from lexmem.models import MemoryStatus
from lexmem.store.fusion import Candidate
from lexmem.store.lance import POSTFILTER_SHARE, MemoryStore, filter_where
from lexmem.store.protocol import MemoryFilter

# The rows and filters the in-memory copy is checked with (test_flat.py): 240 rows over
# three projects, seven sessions and a month, one archived; and two filters more.
FILTERS = [*FLAT_FILTERS, MemoryFilter(status=None), MemoryFilter(status=MemoryStatus.ARCHIVED)]


@pytest.fixture
def filled(lm: Lexmem) -> Lexmem:
    return fill(lm)


COLUMNS = ["id", "content", "project", "salience"]


class _Recorded:
    """A LanceDB query builder that notes whether a filter was put inside it."""

    def __init__(self, query: Any, wheres: list[str]) -> None:
        self._query, self._wheres = query, wheres

    def where(self, where: str, prefilter: bool = False) -> _Recorded:
        self._wheres.append(where)
        return _Recorded(self._query.where(where, prefilter=prefilter), self._wheres)

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._query, name)
        if name in ("select", "limit", "with_row_id"):
            return lambda *a, **k: _Recorded(attr(*a, **k), self._wheres)
        return attr


def _recording(search: Callable[[], Any], wheres: list[str]) -> Callable[[], Any]:
    return lambda: _Recorded(search(), wheres)


def _vector(store: MemoryStore, query: Any) -> Callable[[], Any]:
    return lambda: store._vector_search(query)


def _legs(store: MemoryStore) -> list[tuple[str, Callable[[], Any], str]]:
    return [
        (f"vector {seed}", _vector(store, _unit(np.random.default_rng(seed), 1)[0]), "_distance")
        for seed in (5, 6)
    ]


def _expected(search: Callable[[], Any], flt: MemoryFilter, depth: int, scored: str) -> Any:
    query = search()
    where = filter_where(flt)
    if where:
        query = query.where(where, prefilter=True)
    return query.select([*COLUMNS, scored]).limit(depth).to_list()


def _same(got: list[dict[str, Any]], expected: list[dict[str, Any]], scored: str) -> None:
    assert [r["id"] for r in got] == [r["id"] for r in expected]
    for a, b in zip(got, expected, strict=True):
        assert a[scored] == pytest.approx(b[scored], abs=1e-5)
        assert {k: a[k] for k in COLUMNS} == {k: b[k] for k in COLUMNS}


@pytest.mark.parametrize("depth", [5, 25, 400])
@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: filter_where(f) or "all")
def test_the_rows_are_the_filtered_querys(filled: Lexmem, flt: MemoryFilter, depth: int) -> None:
    store = filled.store
    for _, search, scored in _legs(store):
        got = store.filtered_rows(search, flt, depth, COLUMNS, scored)
        _same(got, _expected(search, flt, depth, scored), scored)


@pytest.mark.parametrize("flt", FILTERS, ids=lambda f: filter_where(f) or "all")
def test_a_wrong_count_of_admitted_rows_costs_a_query_never_rows(
    filled: Lexmem, flt: MemoryFilter
) -> None:
    """The share counted before most rows were archived, or one that is simply wrong:
    too few admitted from a full read sends the query again, filtered first."""
    store = filled.store
    where = filter_where(flt)
    for _, search, scored in _legs(store):
        if where:
            store._shares[where] = (1.0, time.monotonic())
        got = store.filtered_rows(search, flt, 25, COLUMNS, scored)
        _same(got, _expected(search, flt, 25, scored), scored)


def test_the_filter_leaves_the_query_only_when_it_admits_most_rows(filled: Lexmem) -> None:
    store = filled.store
    for name, search, scored in _legs(store):
        for flt, inside in (
            (MemoryFilter(), False),  # 239 of 240 active
            (MemoryFilter(exclude_projects=("shop",)), False),  # two thirds
            (MemoryFilter(project="shop"), True),  # a third
            (MemoryFilter(status=MemoryStatus.ARCHIVED), True),
        ):
            wheres: list[str] = []
            recorded = _recording(search, wheres)
            store.filtered_rows(recorded, flt, 20, COLUMNS, scored)
            assert bool(wheres) == inside, (name, filter_where(flt))
            share = store._shares[filter_where(flt) or ""][0]
            assert (share >= POSTFILTER_SHARE) != inside


def test_most_rows_archived_after_the_count_the_next_count_sees_it(filled: Lexmem) -> None:
    store = filled.store
    flt = MemoryFilter()
    where = filter_where(flt) or ""
    query = _unit(np.random.default_rng(5), 1)[0]
    store.filtered_rows(_vector(store, query), flt, 20, COLUMNS, "_distance")
    assert store._shares[where][0] > 0.9
    active = [r["id"] for r in _expected(_vector(store, query), flt, 400, "_distance")]
    for memory_id in active[:200]:
        store.archive(memory_id)
    wheres: list[str] = []
    got = store.filtered_rows(
        _recording(_vector(store, query), wheres), flt, 20, COLUMNS, "_distance"
    )
    assert wheres == [where]  # too few among the rows read: the filtered query ran
    _same(got, _expected(_vector(store, query), flt, 20, "_distance"), "_distance")
    assert where not in store._shares  # and the share is counted again next time
    store.filtered_rows(_vector(store, query), flt, 20, COLUMNS, "_distance")
    assert store._shares[where][0] < POSTFILTER_SHARE


def test_hits_read_by_row_id_are_the_memories_named_even_after_a_compaction(
    filled: Lexmem,
) -> None:
    """The legs' row ids read the hits' full rows; one from before a compaction may
    name another row or none, and only rows whose id is the one asked are returned:
    the search reads the rest by id."""
    store = filled.store
    query = _unit(np.random.default_rng(9), 1)[0]
    rows = store.filtered_rows(_vector(store, query), MemoryFilter(), 30, ["id"], "_distance")
    wanted = [(r["id"], int(r["_rowid"])) for r in rows]
    read = store.get_by_row_ids(wanted)
    assert set(read) == {i for i, _ in wanted}
    assert all(read[i] == store.get(i, with_embedding=False) for i in read)

    for memory_id, _ in wanted[::2]:  # rows before the rest go: a compaction moves them
        store.delete(memory_id)
    store.optimize()
    after = store.get_by_row_ids(wanted)
    kept = {i for i, _ in wanted[1::2]}
    assert set(after) <= kept and len(after) < len(kept)  # the compaction moved rows
    assert all(after[i] == store.get(i, with_embedding=False) for i in after)

    # The search's own read of its hits: stale row ids, and the memories still come back.
    stale = [Candidate(i, {"id": i, "_rowid": r}, partial=True) for i, r in wanted[1::2]]
    full = filled.searcher._full_rows(stale)
    assert full == {i: store.get(i, with_embedding=False) for i in kept}
