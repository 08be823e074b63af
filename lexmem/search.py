"""Hybrid retrieval: BM25 and vector similarity fused, then blended with salience,
recency and pinned state.

Each leg asks LanceDB for its best candidates under the same filter (prefiltered,
so a filter never empties a page of results). Their normalised scores are fused
into one relevance; the blend then lets a salient, recent or pinned memory edge
ahead of an equally relevant one. Every hit carries the numbers that put it where
it is.
"""

from __future__ import annotations

import math
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from .config import SearchSettings
from .errors import InvalidInputError
from .models import Memory, utcnow
from .store import ROW_COLUMNS, MemoryFilter, MemoryStore, memory_from_row

if TYPE_CHECKING:
    from .embedder import Embedder

__all__ = ["MODES", "SearchHit", "SearchResult", "Searcher"]

MODES = ("hybrid", "bm25", "vector")
# Every column but the vector: the hits are built from the legs' rows, no second read.
_RANK_COLUMNS = list(ROW_COLUMNS)


@dataclass(slots=True)
class SearchHit:
    """One result and why it ranked where it did."""

    memory: Memory
    score: float
    relevance: float
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    similarity: float | None = None
    salience: float = 0.0
    recency: float = 0.0
    pinned: bool = False

    def why(self) -> str:
        parts = []
        if self.bm25_rank is not None:
            parts.append(f"keywords #{self.bm25_rank}")
        if self.vector_rank is not None:
            parts.append(f"meaning #{self.vector_rank} (cos {self.similarity:.2f})")
        parts.append(f"salience {self.salience:.2f}")
        parts.append(f"recency {self.recency:.2f}")
        if self.pinned:
            parts.append("pinned")
        return ", ".join(parts)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.memory.id,
            "score": round(self.score, 6),
            "relevance": round(self.relevance, 6),
            "bm25_rank": self.bm25_rank,
            "bm25_score": None if self.bm25_score is None else round(self.bm25_score, 6),
            "vector_rank": self.vector_rank,
            "similarity": None if self.similarity is None else round(self.similarity, 6),
            "salience": round(self.salience, 6),
            "recency": round(self.recency, 6),
            "pinned": self.pinned,
            "why": self.why(),
            "memory": self.memory.to_dict(),
        }


@dataclass(slots=True)
class SearchResult:
    query: str
    mode: str
    hits: list[SearchHit]
    timings_ms: dict[str, float] = field(default_factory=dict)


@dataclass(slots=True)
class _Candidate:
    id: str
    row: dict[str, Any]
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    similarity: float | None = None


class Searcher:
    """Runs searches against one store with one embedder."""

    def __init__(
        self, store: MemoryStore, embedder: Embedder, settings: SearchSettings | None = None
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.settings = settings or SearchSettings()
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
        query = query.strip()
        if not query:
            raise InvalidInputError("the search query is empty")
        if mode not in MODES:
            raise InvalidInputError(f"unknown search mode {mode!r} (use {', '.join(MODES)})")
        if not 1 <= limit <= 1000:
            raise InvalidInputError(f"limit must be between 1 and 1000, not {limit}")
        flt = flt or MemoryFilter()
        where = flt.where()
        depth = max(limit * 4, 40)
        timings: dict[str, float] = {}
        candidates: dict[str, _Candidate] = {}

        # The keyword leg runs on a worker thread while this one embeds the query and
        # runs the vector leg: LanceDB releases the GIL, so the two overlap on 2 cores.
        bm25_future: Future[tuple[list[dict[str, Any]], float]] | None = None
        if mode in ("hybrid", "bm25"):
            bm25_future = self._pool().submit(self._timed_bm25, query, where, depth)
        if mode in ("hybrid", "vector"):
            t0 = time.perf_counter()
            vector = self.embedder.embed_one(query)
            timings["embed"] = (time.perf_counter() - t0) * 1000
            t0 = time.perf_counter()
            for rank, row in enumerate(self._vector(vector, where, depth), start=1):
                c = candidates.setdefault(row["id"], _Candidate(row["id"], row))
                c.vector_rank = rank
                c.similarity = 1.0 - float(row.get("_distance") or 0.0)
            timings["vector"] = (time.perf_counter() - t0) * 1000
        if bm25_future is not None:
            rows, timings["bm25"] = bm25_future.result()
            for rank, row in enumerate(rows, start=1):
                c = candidates.setdefault(row["id"], _Candidate(row["id"], row))
                c.bm25_rank, c.bm25_score = rank, float(row.get("_score") or 0.0)

        t0 = time.perf_counter()
        ranked = self._blend(list(candidates.values()), mode, now or utcnow())[:limit]
        hits = []
        for score, c, relevance, recency in ranked:
            m = memory_from_row(c.row)  # the legs fetched every column but the vector
            hits.append(
                SearchHit(
                    memory=m, score=score, relevance=relevance,
                    bm25_rank=c.bm25_rank, bm25_score=c.bm25_score,
                    vector_rank=c.vector_rank, similarity=c.similarity,
                    salience=m.salience, recency=recency, pinned=m.pinned,
                )
            )  # fmt: skip
        timings["fuse"] = (time.perf_counter() - t0) * 1000
        if record_access and hits:
            t0 = time.perf_counter()
            self.store.record_access_many([h.memory.id for h in hits])
            timings["record_access"] = (time.perf_counter() - t0) * 1000
        return SearchResult(query, mode, hits, timings)

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
        self, query: str, where: str | None, depth: int
    ) -> tuple[list[dict[str, Any]], float]:
        t0 = time.perf_counter()
        rows = self._bm25(query, where, depth)
        return rows, (time.perf_counter() - t0) * 1000

    def _bm25(self, query: str, where: str | None, depth: int) -> list[dict[str, Any]]:
        q = self.store.table().search(query, query_type="fts", fts_columns="content")
        if where:
            q = q.where(where, prefilter=True)
        rows: list[dict[str, Any]] = q.select([*_RANK_COLUMNS, "_score"]).limit(depth).to_list()
        return rows

    def vector_query(self, vector: Any, where: str | None, depth: int) -> Any:
        """The vector leg's LanceDB query (uses the IVF-PQ index once the store has one)."""
        q = self.store.table().search(vector, vector_column_name="vector").distance_type("cosine")
        if self.store.has_vector_index():
            # Re-rank the index's candidates by exact distance: PQ alone loses recall.
            q = q.nprobes(32).refine_factor(4)
        if where:
            q = q.where(where, prefilter=True)
        return q.select([*_RANK_COLUMNS, "_distance"]).limit(depth)

    def _vector(self, vector: Any, where: str | None, depth: int) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = self.vector_query(vector, where, depth).to_list()
        return rows

    def _blend(
        self, candidates: list[_Candidate], mode: str, now: datetime
    ) -> list[tuple[float, _Candidate, float, float]]:
        """Score fusion, then a multiplicative blend with salience, recency and pinning.

        Relevance is the mean of the legs' normalised scores: BM25 divided by the best
        BM25 score of this query, and cosine similarity as it is (a rank-only fusion
        would rank an unrelated memory 7th by meaning nearly as high as the 1st). A
        candidate only the vector leg found, and below ``min_similarity``, is dropped:
        it shares neither words nor meaning with the query. Salience, recency and
        pinning then scale relevance by at most a quarter, so they reorder near-equals
        but never lift an irrelevant memory over a relevant one.
        """
        s = self.settings
        best_bm25 = max((c.bm25_score or 0.0 for c in candidates), default=0.0) or 1.0
        legs = {"hybrid": 2, "bm25": 1, "vector": 1}[mode]
        w_rel = max(0.0, 1.0 - s.salience_weight - s.recency_weight)
        out = []
        for c in candidates:
            keyword = (c.bm25_score or 0.0) / best_bm25 if c.bm25_rank is not None else 0.0
            meaning = max(0.0, c.similarity or 0.0) if c.vector_rank is not None else 0.0
            if c.bm25_rank is None and meaning < s.min_similarity:
                continue
            relevance = (keyword + meaning) / legs
            recency = self._recency(c.row, now)
            salience = min(1.0, max(0.0, float(c.row.get("salience") or 0.0)))
            weight = w_rel + s.salience_weight * salience + s.recency_weight * recency
            score = relevance * weight * (1.0 + s.pinned_boost if c.row.get("pinned") else 1.0)
            out.append((score, c, relevance, recency))
        out.sort(key=lambda t: (-t[0], t[1].id))
        return out

    def _recency(self, row: dict[str, Any], now: datetime) -> float:
        stamps = [
            t for t in (row.get("created_at"), row.get("last_reinforced_at")) if t is not None
        ]
        if not stamps:
            return 0.0
        age_days = max(0.0, (now - max(stamps)).total_seconds() / 86400.0)
        return math.pow(0.5, age_days / max(self.settings.recency_half_life_days, 1e-6))
