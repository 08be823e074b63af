"""Hybrid retrieval: BM25 and vector similarity fused, then blended with salience,
recency and pinned state.

Each leg asks LanceDB for its best candidates under the same filter (prefiltered,
so a filter never empties a page of results). Hybrid search then reads the sessions
of the best candidates whole, so a memory is also found by the words of its session
neighbours, and fuses every signal by per-query z-scores with a boost for the
session holding the best match (see :class:`Fusion`). The blend then lets a salient,
recent or pinned memory edge ahead of an equally relevant one. Every hit carries
the numbers that put it where it is.

The queries are LanceDB's and live here; what is done with their rows (the fusion,
the session context, the blend, the hits) is :mod:`lexmem.store.fusion`, which the
PostgreSQL backend's search shares. Its names are re-exported here.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lexmem.models import Memory, utcnow
from lexmem.settings import SearchSettings
from lexmem.store.flat import arrow_rows
from lexmem.store.fusion import (
    MODES,
    STOP_WORDS,
    Candidate,
    Fusion,
    SearchHit,
    SearchResult,
    blend,
    check_request,
    context_sessions,
    fuse,
    hit,
    leg_depth,
    listed,
    match_spans,
    query_terms,
    recency,
    session_context,
    stem,
)
from lexmem.store.lance import ROW_ID, MemoryStore, filter_where
from lexmem.store.lancedb_import import import_lancedb
from lexmem.store.protocol import MemoryFilter
from lexmem.store.schema import ROW_COLUMNS, memory_from_row

if TYPE_CHECKING:
    from lexmem.embedder import Embedder

__all__ = [
    "MODES",
    "STOP_WORDS",
    "Fusion",
    "SearchHit",
    "SearchResult",
    "Searcher",
    "listed",
    "match_spans",
    "query_terms",
    "stem",
]

# The fusion's candidate, under the name this module's callers know.
_Candidate = Candidate
# Every column but the vector: the hits are built from the legs' rows, no second read.
_RANK_COLUMNS = list(ROW_COLUMNS)
# What ranking reads. Hybrid legs and the session read turn only these into Python
# values (all columns for ~700 rows cost ~10 ms a query); the hits are read in full.
# Not the content, the largest column, which ranking never reads (at 100,000 memories
# reading it for the legs' rows cost ~3 ms a search).
_SLIM_COLUMNS = (
    "id", "session_id", "created_at", "word_count", "metadata", "salience", "pinned",
    "last_reinforced_at", "source",
)  # fmt: skip


def _arrow_compute() -> Any:
    import pyarrow.compute as pc

    return pc


class Searcher:
    """Runs searches against one store with one embedder."""

    def __init__(
        self, store: MemoryStore, embedder: Embedder, settings: SearchSettings | None = None
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings or SearchSettings()
        self.fusion = Fusion()
        self._executor: ThreadPoolExecutor | None = None
        self._pool_lock = threading.Lock()

    def search(
        self,
        query: str,
        flt: MemoryFilter | None = None,
        *,
        limit: int = 10,
        mode: str = "hybrid",
        record_access: bool = True,
        now: datetime | None = None,
    ) -> SearchResult:
        """The best ``limit`` memories for ``query`` under ``flt`` (active ones by default)."""
        query = check_request(query, mode, limit)
        flt = flt or MemoryFilter()
        depth = leg_depth(mode, limit, self.fusion)
        timings: dict[str, float] = {}
        candidates: dict[str, _Candidate] = {}

        # The keyword leg runs on a worker thread while this one embeds the query and
        # runs the vector leg: LanceDB releases the GIL, so the two overlap on 2 cores.
        bm25_future: Future[tuple[list[dict[str, Any]], float]] | None = None
        vector: Any = None
        slim = mode == "hybrid" and self.fusion.session_context
        columns = list(_SLIM_COLUMNS) if slim else _RANK_COLUMNS
        if mode in ("hybrid", "bm25"):
            bm25_future = self._pool().submit(self._timed_bm25, query, flt, depth, columns)
        if mode in ("hybrid", "vector"):
            t0 = time.perf_counter()
            vector = self.embedder.embed_one(query)
            timings["embed"] = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            rows = self.store.nearest_rows(vector, flt, depth, columns)
            for rank, row in enumerate(rows, start=1):
                c = candidates.setdefault(row["id"], _Candidate(row["id"], row, partial=slim))
                c.vector_rank = rank
                c.similarity = 1.0 - float(row.get("_distance") or 0.0)
            timings["vector"] = (time.perf_counter() - t0) * 1000
        if bm25_future is not None:
            rows, timings["bm25"] = bm25_future.result()
            for rank, row in enumerate(rows, start=1):
                c = candidates.setdefault(row["id"], _Candidate(row["id"], row, partial=slim))
                c.bm25_rank, c.bm25_score = rank, float(row.get("_score") or 0.0)

        if mode == "hybrid" and self.fusion.session_context and candidates:
            t0 = time.perf_counter()
            self._session_context(candidates, vector, flt)
            timings["context"] = (time.perf_counter() - t0) * 1000

        t0 = time.perf_counter()
        ranked = self._blend(list(candidates.values()), mode, now or utcnow(), query)[:limit]
        read = self._full_rows([c for _, c, _, _ in ranked])
        hits = [
            hit(read[c.id] if c.partial else memory_from_row(c.row), score, c, relevance, rec)
            for score, c, relevance, rec in ranked
        ]
        timings["fuse"] = (time.perf_counter() - t0) * 1000
        if record_access and hits:
            t0 = time.perf_counter()
            self.store.record_access_many([h.memory.id for h in hits])
            timings["record_access"] = (time.perf_counter() - t0) * 1000
        return SearchResult(query, mode, hits, timings)

    def _full_rows(self, ranked: list[_Candidate]) -> dict[str, Memory]:
        """Complete the slim rows of the hits: from the session read's Arrow table when
        it holds them (no second query), else by the row ids the legs returned, else
        one ``get_many``; returned by id."""
        by_table: dict[int, tuple[Any, list[_Candidate]]] = {}
        elsewhere: list[_Candidate] = []
        for c in ranked:
            if not c.partial:
                continue
            if c.source is None:
                elsewhere.append(c)
            else:
                by_table.setdefault(id(c.source[0]), (c.source[0], []))[1].append(c)
        for table, cands in by_table.values():
            taken = table.take([c.source[1] for c in cands if c.source is not None])
            for c, row in zip(cands, arrow_rows(taken), strict=True):
                c.row, c.partial, c.source = row, False, None
        if not elsewhere:
            return {}
        by_row = [(c.id, int(c.row[ROW_ID])) for c in elsewhere if c.row.get(ROW_ID) is not None]
        read = self.store.get_by_row_ids(by_row)
        missing = [c.id for c in elsewhere if c.id not in read]
        if missing:
            read.update((m.id, m) for m in self.store.get_many(missing))
        return read

    def _pool(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lexmem-bm25")
            return self._executor

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def _timed_bm25(
        self, query: str, flt: MemoryFilter, depth: int, columns: list[str]
    ) -> tuple[list[dict[str, Any]], float]:
        t0 = time.perf_counter()
        rows = self._bm25(query, flt, depth, columns)
        return rows, (time.perf_counter() - t0) * 1000

    def _bm25(
        self, query: str, flt: MemoryFilter, depth: int, columns: list[str] = _RANK_COLUMNS
    ) -> list[dict[str, Any]]:
        import_lancedb()
        from lancedb.query import FullTextOperator, MultiMatchQuery

        # Fielded BM25: a memory matches on its own words and, weighted down, on those
        # of the memories just before and after it in its session (the store's
        # ``context`` column). Why: a question's words are often split between a fact
        # and what led to it or followed it; one field scored jointly finds the memory
        # that they together answer, which the neighbours' separate scores in
        # _session_context do not. See Fusion.context.
        f = self.fusion
        if f.context > 0:
            fields = MultiMatchQuery(
                query, ["content", "context"], boosts=[1.0, f.context],
                operator=FullTextOperator.OR,  # LanceDB's default, named for the type checker
            )  # fmt: skip
            q = self.store.table().search(fields, query_type="fts")
        else:  # a zero boost would still let the field's matches in
            q = self.store.table().search(query, query_type="fts", fts_columns="content")
        # The filter stays inside the keyword query (not MemoryStore.filtered_rows):
        # LanceDB counts BM25's document frequencies over the rows it admits, so a
        # filter applied after would change the scores.
        where = filter_where(flt)
        if where:
            q = q.where(where, prefilter=True)
        q = q.with_row_id(True)  # the hits' full rows are read by it (_full_rows)
        return arrow_rows(q.select([*columns, "_score"]).limit(depth).to_arrow())

    def vector_query(
        self, vector: Any, where: str | None, depth: int, columns: list[str] = _RANK_COLUMNS
    ) -> Any:
        """The vector leg's LanceDB query (:meth:`MemoryStore.vector_query`)."""
        return self.store.vector_query(vector, where, depth, columns)

    def _session_context(
        self, candidates: dict[str, _Candidate], vector: Any, flt: MemoryFilter
    ) -> None:
        """Read the sessions of the best candidates whole and give each of their
        memories its neighbours' keyword evidence.

        Why: a session's memories are its captured facts in order, and the words that
        make one findable are often in the one before or after it (a question and its
        answer, a fact and what "it" refers to). So a memory gets its neighbours' BM25
        scores, halved per step away, as a signal of its own, and every memory of those
        sessions joins the pool with its exact cosine: one that neither leg found is
        reached through a neighbour. One read serves the whole pool: the in-memory copy
        of the rows while it is current, else one ``session_id IN (...)`` query.
        """
        import numpy as np

        f = self.fusion
        sessions = context_sessions(candidates, f)
        if not sessions:
            # Nothing captured from a conversation among the best hits: no context to
            # read, and the hits' full rows come from one small read at the end.
            return
        # The same query reads the other candidates' full rows, for whichever make the hits.
        others = [
            c.id
            for c in candidates.values()
            if c.partial and c.row.get("session_id") not in sessions
        ]
        # The hits' full rows come from this table.
        table, vecs = self.store.session_table(
            sessions, flt, _RANK_COLUMNS, limit=f.max_rows + len(others), also_ids=others
        )
        n = table.num_rows
        if n == 0:
            return
        sims = None if vector is None else vecs @ np.asarray(vector, dtype=np.float32)
        # Rows in session order (session, then capture time, then id); the neighbour at
        # offset o counts only inside its session.
        pc = _arrow_compute()
        order = pc.sort_indices(
            table,
            sort_keys=[
                ("session_id", "ascending"),
                ("created_at", "ascending"),
                ("id", "ascending"),
            ],
        ).to_numpy()
        table_order = order.tolist()
        rows = arrow_rows(table.select(list(_SLIM_COLUMNS)).take(order))
        ordered = None if sims is None else sims[order]
        cands = session_context(candidates, rows, ordered, sessions, f, partial=True)
        for k, c in enumerate(cands):
            if c.partial:
                c.source = (table, table_order[k])

    def _fuse(self, candidates: list[_Candidate], query: str) -> list[float]:
        """Hybrid relevance in 0..1 (:func:`lexmem.store.fusion.fuse`)."""
        return fuse(candidates, query, self.fusion)

    def _blend(
        self, candidates: list[_Candidate], mode: str, now: datetime, query: str = ""
    ) -> list[tuple[float, _Candidate, float, float]]:
        """Score fusion, then the blend with salience, recency and pinning
        (:func:`lexmem.store.fusion.blend`)."""
        return blend(candidates, mode, now, query, self.settings, self.fusion)

    def _recency(self, row: dict[str, Any], now: datetime) -> float:
        return recency(row, now, self.settings)
