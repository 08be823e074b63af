"""Hybrid retrieval: BM25 and vector similarity fused, then blended with salience,
recency and pinned state.

Each leg asks LanceDB for its best candidates under the same filter (prefiltered,
so a filter never empties a page of results). Hybrid search then reads the sessions
of the best candidates whole, so a memory is also found by the words of its session
neighbours, and fuses every signal by per-query z-scores with a boost for the
session holding the best match (see :class:`Fusion`). The blend then lets a salient,
recent or pinned memory edge ahead of an equally relevant one. Every hit carries
the numbers that put it where it is.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lexmem.errors import InvalidInputError
from lexmem.models import Memory, utcnow
from lexmem.settings import SearchSettings
from lexmem.store.lance import SESSION_SOURCES, MemoryStore, filter_where
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

MODES = ("hybrid", "bm25", "vector")
# Every column but the vector: the hits are built from the legs' rows, no second read.
_RANK_COLUMNS = list(ROW_COLUMNS)
# What ranking reads. Hybrid legs and the session read turn only these into Python
# values (all columns for ~700 rows cost ~10 ms a query); the hits are read in full.
_SLIM_COLUMNS = (
    "id", "session_id", "created_at", "content", "word_count", "metadata", "salience",
    "pinned", "last_reinforced_at", "source",
)  # fmt: skip
# Whose session is a conversation in order, so that neighbours are context.
_SESSION_SOURCES = SESSION_SOURCES
# metadata is JSON written with sort_keys; a regex reads the speaker without parsing it.
_SPEAKER = re.compile(r'"speaker": "((?:[^"\\]|\\.)*)"')
# A session's handoff: the summary capture writes at a session's end (same JSON, same way).
_SUMMARY = re.compile(r'"candidate_kind": "handoff"')
_WORD = re.compile(r"[^\W_]+")
# English function words (NLTK's list, which bench/locomo.py's BM25 baseline uses too):
# a question's "which", "does", "the" say nothing about what it asks for. The full-text
# index's own list leaves some of them in ("does" matches there).
_STOP_TEXT = """i me my myself we our ours ourselves you your yours yourself yourselves he him his
    himself she her hers herself it its itself they them their theirs themselves what which
    who whom this that these those am is are was were be been being have has had having do
    does did doing a an the and but if or because as until while of at by for with about
    against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each
    few more most other some such no nor not only own same so than too very s t can will
    just don should now d ll m o re ve y ain aren couldn didn doesn hadn hasn haven isn ma
    mightn mustn needn shan shouldn wasn weren won wouldn"""
STOP_WORDS = frozenset(_STOP_TEXT.split())
# What a listing asks of a hit (see listed): more than this share of the query's words,
# or a cosine within this margin of the best hit's and above this floor.
LIST_COVERAGE = 0.5
LIST_MEANING_MARGIN = 0.15
LIST_MEANING_FLOOR = 0.25


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
    neighbour_keywords: float = 0.0
    salience: float = 0.0
    recency: float = 0.0
    pinned: bool = False

    def why(self) -> str:
        parts = []
        if self.bm25_rank is not None:
            parts.append(f"keywords #{self.bm25_rank}")
        if self.vector_rank is not None:
            parts.append(f"meaning #{self.vector_rank} (cos {self.similarity:.2f})")
        if self.neighbour_keywords:
            parts.append("keywords in its session neighbours")
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
            "neighbour_keywords": round(self.neighbour_keywords, 6),
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
    # Session context (hybrid only), set by Searcher._session_context.
    session_key: str | None = None
    neighbour_keywords: float = 0.0  # the neighbours' BM25 scores, weighted by distance
    partial: bool = False  # ``row`` holds only what ranking reads (_SLIM_COLUMNS)
    source: tuple[Any, int] | None = None  # (Arrow table, row index) holding the full row


@dataclass(frozen=True, slots=True)
class Fusion:
    """How hybrid search weighs its evidence: weights on per-query z-scores.

    ``speaker`` rewards a memory whose speaker (``metadata["speaker"]``: who said the
    conversation turns it was drawn from, which the hook records for every agent session
    and a generic event may name) the query names, word for word, case aside.

    Measured with bench/locomo.py (five dev conversations, categories 1-4, R@10; the
    old hybrid scored 66.2 on the same store, these defaults 77.6, Hit@10 84.2).
    Per-query z-score fusion of the legs instead of max-normalised scores: 68.6.
    Then, each figure the loss when that feature alone is taken out of the shipped
    set: session context as a whole (neighbours' keywords, whole sessions in the
    pool, session boost) -9.8; neighbours' keywords -1.4; session boost -1.9; length
    prior -1.9; speaker -0.4 (noise is about +-0.3).
    Tried and dropped (inside +-0.3, i.e. noise): the cosine of the query with a memory
    plus its neighbours, an "answers a question" prior, pseudo-relevance feedback on
    the vectors; a per-session diversity penalty cost 4-11 points. The weights are
    round numbers on a plateau: picking them per fold (leave one conversation out)
    held out 77.5, no better than these fixed ones.
    The keyword leg searching the previous memory's words as a second field (boost
    ``context``) then took R@10 from 77.6 to 78.9 and Hit@10 from 84.2 to 85.8 (R@5
    68.9 to 71.0); leave one conversation out, with the boost picked from 0, 0.3,
    0.6, 1.0 on the other four, held out 78.6 / 85.3 (the old 77.6 / 84.2). Two
    previous memories as context instead of one: 78.8, no better. The field holding
    the previous and the next memory's words: R@10 79.3, Hit@10 86.3, multi-hop 45.1
    to 47.8; held out (boost picked from 0.3, 0.6, 1.0 per fold) 79.0 / 86.2, against
    78.6 / 85.3 for the previous memory alone.
    Tried and dropped at that point (within noise, +-0.4): a second vector per memory
    embedded with its neighbours' text (it doubles the embedding at capture), and a
    per-session cap on the top ten (it cost 0.2-7 points).
    """

    keyword: float = 1.0
    context: float = 0.6  # BM25 boost of the neighbours' words (the context field)
    meaning: float = 1.0
    neighbour_keyword: float = 0.5
    session: float = 0.5
    length: float = 0.6
    speaker: float = 0.2
    window: int = 2  # neighbours on each side that are a memory's context
    decay: float = 0.5  # a neighbour one step further counts this much less
    seed_depth: int = 10  # the sessions of each leg's best this many hits are read whole
    pool_depth: int = 100  # each leg's depth in hybrid mode
    max_rows: int = 3000  # session rows read per query, at most
    session_context: bool = True


def _speaker(row: dict[str, Any]) -> set[str]:
    """The words of ``metadata["speaker"]``, lower-cased (empty when there is none)."""
    found = _SPEAKER.search(row.get("metadata") or "")
    if not found:
        return set()
    name = json.loads(f'"{found[1]}"') if "\\" in found[1] else found[1]
    return set(_WORD.findall(name.lower()))


def stem(word: str) -> str:
    """A light English stem: enough that "databases", "used" and "using" meet "database"
    and "use" (plural, past and -ing endings, a final e), not a full Porter stemmer."""
    w = word.lower().removesuffix("'s").removesuffix("’s")
    if len(w) > 4 and w.endswith("ies"):
        w = w[:-3] + "y"
    elif len(w) > 4 and w.endswith(("sses", "shes", "ches", "xes")):
        w = w[:-2]
    elif len(w) > 3 and w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    for suffix in ("ing", "ed"):
        if len(w) >= len(suffix) + 2 and w.endswith(suffix):
            w = w[: -len(suffix)]
            if len(w) > 3 and w[-1] == w[-2] and w[-1] not in "aeiouls":
                w = w[:-1]  # "running" -> "run"
            break
    return w[:-1] if len(w) > 2 and w.endswith("e") else w


def query_terms(query: str) -> set[str]:
    """The stems of a query's words that carry meaning: its stop words left out, unless
    it has nothing else."""
    words = [w.lower() for w in _WORD.findall(query)]
    content = [w for w in words if w not in STOP_WORDS]
    return {stem(w) for w in content or words}


def match_spans(text: str, query: str) -> list[tuple[int, int]]:
    """Where ``text`` holds the query's words: (start, end) character offsets of each
    whole word whose stem is one of :func:`query_terms`, in order. Case aside; "database"
    finds "Databases"."""
    terms = query_terms(query)
    if not terms:
        return []
    return [(m.start(), m.end()) for m in _WORD.finditer(text) if stem(m.group()) in terms]


def _coverage(m: Memory, terms: set[str]) -> float:
    """The share of ``terms`` that the memory's title or text holds."""
    if not terms:
        return 0.0
    found = {stem(w) for w in _WORD.findall(f"{m.title} {m.content}")} & terms
    return len(found) / len(terms)


def listed(hits: list[SearchHit], query: str) -> list[SearchHit]:
    """The hits worth showing a person who searched ``query``, in their order.

    Ranking takes every memory with a keyword or some meaning in common, which suits a
    top ten an agent reads; a list a person scrolls then shows half a small store for a
    question, most of it matched by one common word ("use") or a vague cosine. A hit
    is listed when it holds more than half the query's words (stop words aside, light
    stemming) or its meaning is near the best hit's: cosine within
    ``LIST_MEANING_MARGIN`` of the best and above ``LIST_MEANING_FLOOR``. The best hit
    always is. Not applied to the ranked top-k agents get: bench/locomo.py measures that.
    """
    if not hits:
        return []
    terms = query_terms(query)
    best = max((h.similarity or 0.0 for h in hits), default=0.0)
    near = max(LIST_MEANING_FLOOR, best - LIST_MEANING_MARGIN)
    return [
        h
        for n, h in enumerate(hits)
        if n == 0 or (h.similarity or 0.0) >= near or _coverage(h.memory, terms) > LIST_COVERAGE
    ]


def _summary(row: dict[str, Any]) -> bool:
    """Whether a row is a session's handoff summary (see :meth:`Searcher._fuse`)."""
    return _SUMMARY.search(row.get("metadata") or "") is not None


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
        query = query.strip()
        if not query:
            raise InvalidInputError("the search query is empty")
        if mode not in MODES:
            raise InvalidInputError(f"unknown search mode {mode!r} (use {', '.join(MODES)})")
        if not 1 <= limit <= 1000:
            raise InvalidInputError(f"limit must be between 1 and 1000, not {limit}")
        flt = flt or MemoryFilter()
        where = filter_where(flt)
        # Hybrid reads whole sessions around its best hits, so its legs need not dig as
        # deep for a long result list as a single leg does.
        depth = max(limit * 4, 40) if mode != "hybrid" else max(limit, self.fusion.pool_depth)
        timings: dict[str, float] = {}
        candidates: dict[str, _Candidate] = {}

        # The keyword leg runs on a worker thread while this one embeds the query and
        # runs the vector leg: LanceDB releases the GIL, so the two overlap on 2 cores.
        bm25_future: Future[tuple[list[dict[str, Any]], float]] | None = None
        vector: Any = None
        slim = mode == "hybrid" and self.fusion.session_context
        columns = list(_SLIM_COLUMNS) if slim else _RANK_COLUMNS
        if mode in ("hybrid", "bm25"):
            bm25_future = self._pool().submit(self._timed_bm25, query, where, depth, columns)
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
            self._session_context(candidates, vector, where)
            timings["context"] = (time.perf_counter() - t0) * 1000

        t0 = time.perf_counter()
        ranked = self._blend(list(candidates.values()), mode, now or utcnow(), query)[:limit]
        read = self._full_rows([c for _, c, _, _ in ranked])
        hits = []
        for score, c, relevance, recency in ranked:
            m = read[c.id] if c.partial else memory_from_row(c.row)
            hits.append(
                SearchHit(
                    memory=m, score=score, relevance=relevance,
                    bm25_rank=c.bm25_rank, bm25_score=c.bm25_score,
                    vector_rank=c.vector_rank, similarity=c.similarity,
                    neighbour_keywords=c.neighbour_keywords,
                    salience=m.salience, recency=recency, pinned=m.pinned,
                )
            )  # fmt: skip
        timings["fuse"] = (time.perf_counter() - t0) * 1000
        if record_access and hits:
            t0 = time.perf_counter()
            self.store.record_access_many([h.memory.id for h in hits])
            timings["record_access"] = (time.perf_counter() - t0) * 1000
        return SearchResult(query, mode, hits, timings)

    def _full_rows(self, ranked: list[_Candidate]) -> dict[str, Memory]:
        """Complete the slim rows of the hits: from the session read's Arrow table when
        it holds them (no second query), else one ``get_many``, returned by id."""
        by_table: dict[int, tuple[Any, list[_Candidate]]] = {}
        elsewhere: list[str] = []
        for c in ranked:
            if not c.partial:
                continue
            if c.source is None:
                elsewhere.append(c.id)
            else:
                by_table.setdefault(id(c.source[0]), (c.source[0], []))[1].append(c)
        for table, cands in by_table.values():
            taken = table.take([c.source[1] for c in cands if c.source is not None])
            for c, row in zip(cands, taken.to_pylist(), strict=True):
                c.row, c.partial, c.source = row, False, None
        return {m.id: m for m in self.store.get_many(elsewhere)} if elsewhere else {}

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
        self, query: str, where: str | None, depth: int, columns: list[str]
    ) -> tuple[list[dict[str, Any]], float]:
        t0 = time.perf_counter()
        rows = self._bm25(query, where, depth, columns)
        return rows, (time.perf_counter() - t0) * 1000

    def _bm25(
        self, query: str, where: str | None, depth: int, columns: list[str] = _RANK_COLUMNS
    ) -> list[dict[str, Any]]:
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
        if where:
            q = q.where(where, prefilter=True)
        rows: list[dict[str, Any]] = q.select([*columns, "_score"]).limit(depth).to_list()
        return rows

    def vector_query(
        self, vector: Any, where: str | None, depth: int, columns: list[str] = _RANK_COLUMNS
    ) -> Any:
        """The vector leg's LanceDB query (:meth:`MemoryStore.vector_query`)."""
        return self.store.vector_query(vector, where, depth, columns)

    def _session_context(
        self, candidates: dict[str, _Candidate], vector: Any, where: str | None
    ) -> None:
        """Read the sessions of the best candidates whole and give each of their
        memories its neighbours' keyword evidence.

        Why: a session's memories are its captured facts in order, and the words that
        make one findable are often in the one before or after it (a question and its
        answer, a fact and what "it" refers to). So a memory gets its neighbours' BM25
        scores, halved per step away, as a signal of its own, and every memory of those
        sessions joins the pool with its exact cosine: one that neither leg found is
        reached through a neighbour. One ``session_id IN (...)`` query (~5 ms) serves
        the whole pool.
        """
        import numpy as np

        f = self.fusion
        seeds = sorted(
            (c for c in candidates.values() if c.bm25_rank is not None),
            key=lambda c: c.bm25_rank or 0,
        )[: f.seed_depth]
        seeds += sorted(
            (c for c in candidates.values() if c.vector_rank is not None),
            key=lambda c: c.vector_rank or 0,
        )[: f.seed_depth]
        sessions = {
            str(c.row["session_id"])
            for c in seeds
            if c.row.get("session_id") and c.row.get("source") in _SESSION_SOURCES
        }
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
        table = self.store.session_rows(
            sessions,
            where,
            [*_RANK_COLUMNS, "vector"],
            limit=f.max_rows + len(others),
            also_ids=others,
        )
        n = table.num_rows
        if n == 0:
            return
        flat = table.column("vector").combine_chunks().flatten()
        vecs = np.asarray(flat.to_numpy(zero_copy_only=False), dtype=np.float32).reshape(n, -1)
        table = table.drop_columns(["vector"]).combine_chunks()  # hits' full rows come from here
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
        cols = {name: table.column(name).take(order).to_pylist() for name in _SLIM_COLUMNS}
        # A memory whose session was not read whole has no neighbours here, nor has one
        # that is not a step of the conversation: a workflow distilled from it, or the
        # session's summary, which restates the session (its neighbours' words are its
        # own words counted twice; see _fuse).
        keys = [
            s if s in sessions and src in _SESSION_SOURCES and not _SUMMARY.search(meta or "")
            else f"\x00{i}"
            for s, i, src, meta in zip(
                cols["session_id"], cols["id"], cols["source"], cols["metadata"], strict=True
            )
        ]  # fmt: skip
        cands: list[_Candidate] = []
        for k in range(n):
            row = {name: cols[name][k] for name in _SLIM_COLUMNS}
            c = candidates.get(row["id"])
            if c is None:
                c = candidates[row["id"]] = _Candidate(row["id"], row, partial=True)
            if c.partial:
                c.source = (table, table_order[k])
            if sims is not None:
                c.similarity = float(sims[table_order[k]])  # exact, leg hits and newcomers
            if keys[k] in sessions:
                c.session_key = keys[k]
            cands.append(c)

        keyword = np.asarray([c.bm25_score or 0.0 for c in cands])
        near = np.zeros(n)
        codes = np.unique(np.asarray(keys, dtype=object), return_inverse=True)[1]
        for o in range(1, f.window + 1):
            same = codes[o:] == codes[:-o]  # rows k and k + o share a session
            if not same.any():
                break
            w = f.decay ** (o - 1)
            near[:-o] += w * same * keyword[o:]
            near[o:] += w * same * keyword[:-o]
        for k, c in enumerate(cands):
            c.neighbour_keywords = float(near[k])

    def _fuse(self, candidates: list[_Candidate], query: str) -> list[float]:
        """Hybrid relevance in 0..1: per-query z-score fusion, then the session boost.

        Why z-scores (+2.4 R@10 over max-normalised scores; the RRF baseline is below
        both): BM25 scores spread wide when a query's words are rare and bunch when
        they are common, cosines the other way; standardising each signal over this
        query's pool puts "how far above the rest" on one scale for all of them.
        Two small priors ride along: length (a longer memory holds more, and BM25's
        length normalisation over-punishes it) and the query naming the memory's
        speaker (``metadata["speaker"]``). A session's handoff summary gets no length
        prior: it is long because it restates its whole session, and with it a handoff
        that mentions the question's words in passing outranked the memory answering it. The session boost then adds half the best
        fused score in the memory's session: evidence that the session is about the
        question.
        """
        import numpy as np

        f = self.fusion

        def z(values: Any) -> Any:
            x = np.asarray(values, dtype=np.float64)
            sd = float(x.std())
            return (x - x.mean()) / sd if sd > 1e-9 else np.zeros_like(x)

        floor = min((c.similarity for c in candidates if c.similarity is not None), default=0.0)
        meaning = [floor if c.similarity is None else c.similarity for c in candidates]
        words = set(_WORD.findall(query.lower()))
        length = z([math.log1p(float(c.row.get("word_count") or 0)) for c in candidates])
        length[[n for n, c in enumerate(candidates) if _summary(c.row)]] = 0.0
        fused = (
            f.keyword * z([c.bm25_score or 0.0 for c in candidates])
            + f.meaning * z(meaning)
            + f.neighbour_keyword * z([c.neighbour_keywords for c in candidates])
            + f.length * length
            + f.speaker * z([float(bool(words & _speaker(c.row))) for c in candidates])
        )
        if f.session:
            best: dict[str, float] = {}
            for c, x in zip(candidates, fused, strict=True):
                if c.session_key is not None:
                    best[c.session_key] = max(best.get(c.session_key, -math.inf), float(x))
            fused = fused + f.session * np.asarray(
                [
                    best[c.session_key] if c.session_key is not None else float(x)
                    for c, x in zip(candidates, fused, strict=True)
                ]
            )
        lo, hi = float(fused.min()), float(fused.max())
        if hi - lo < 1e-12:
            return [1.0] * len(candidates)
        return [float(x) for x in (fused - lo) / (hi - lo)]

    def _blend(
        self, candidates: list[_Candidate], mode: str, now: datetime, query: str = ""
    ) -> list[tuple[float, _Candidate, float, float]]:
        """Score fusion, then a multiplicative blend with salience, recency and pinning.

        Hybrid relevance comes from :meth:`_fuse`, scaled to 0..1 over the pool. A
        single leg's relevance is its normalised score: BM25 divided by the best BM25
        score of this query, or cosine similarity as it is. A candidate with no
        keyword match of its own or in its neighbours, and below ``min_similarity``,
        is dropped: it shares neither words nor meaning with the query. Salience,
        recency and pinning then scale relevance by at most a quarter, so they reorder
        near-equals but never lift an irrelevant memory over a relevant one.
        """
        s = self.settings
        best_bm25 = max((c.bm25_score or 0.0 for c in candidates), default=0.0) or 1.0
        w_rel = max(0.0, 1.0 - s.salience_weight - s.recency_weight)
        fused = self._fuse(candidates, query) if mode == "hybrid" and candidates else None
        out = []
        for n, c in enumerate(candidates):
            keyword = (c.bm25_score or 0.0) / best_bm25 if c.bm25_rank is not None else 0.0
            meaning = max(0.0, c.similarity or 0.0)
            if c.bm25_rank is None and not c.neighbour_keywords and meaning < s.min_similarity:
                continue
            single = keyword if mode == "bm25" else meaning
            relevance = single if fused is None else fused[n]
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
