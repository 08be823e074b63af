"""What hybrid search does once a backend has run its queries: the candidates' evidence,
its fusion by per-query z-scores, the session context, the blend with salience, recency
and pinning, and the hits with why each ranked where it did.

Every backend's search (:mod:`lexmem.store.search` for LanceDB,
:mod:`lexmem.store.postgres.search`) runs its own keyword and vector legs and its own
session read, then hands the rows to the functions here, so that the same data ranks the
same way on either. Nothing here queries a store: rows are plain dicts of the memory
row's fields (:data:`lexmem.store.schema.ROW_COLUMNS`, ``metadata`` as its JSON text).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import lru_cache
from typing import Any

from lexmem.errors import InvalidInputError
from lexmem.models import Memory
from lexmem.settings import SearchSettings
from lexmem.store.schema import SESSION_SOURCES

__all__ = [
    "LIST_COVERAGE",
    "LIST_MEANING_FLOOR",
    "LIST_MEANING_MARGIN",
    "MODES",
    "STOP_WORDS",
    "Candidate",
    "Fusion",
    "SearchHit",
    "SearchResult",
    "blend",
    "check_request",
    "context_sessions",
    "fuse",
    "hit",
    "leg_depth",
    "listed",
    "match_spans",
    "query_terms",
    "recency",
    "session_context",
    "stem",
]

MODES = ("hybrid", "bm25", "vector")
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
class Candidate:
    """A memory in a query's pool and the evidence for it so far."""

    id: str
    row: dict[str, Any]
    bm25_rank: int | None = None
    bm25_score: float | None = None
    vector_rank: int | None = None
    similarity: float | None = None
    # Session context (hybrid only), set by session_context.
    session_key: str | None = None
    neighbour_keywords: float = 0.0  # the neighbours' BM25 scores, weighted by distance
    # ``row`` holds only what ranking reads; the backend completes it for the hits.
    partial: bool = False
    source: tuple[Any, int] | None = None  # where a backend holds the full row, if it does


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

    The weights are now chosen by bench/locomo.py alone, leaving one conversation out
    over its grid (keyword and meaning 0.8 or 1.0, speaker 0.2 or 0.4): every fold and
    all five together pick keyword 0.8, meaning 0.8, speaker 0.4, so held out and
    in-sample agree at R@10 80.2, Hit@10 87.2, multi-hop 48.4 (the earlier 1.0 / 1.0 /
    0.2: 79.3 / 86.3 / 47.8). Widening the grid to length 0.6 or 0.9 and neighbours'
    keywords 0.25 or 0.5 picks the same in four folds of five (held out 80.2 / 87.1).
    With the two legs at 0.8 the priors (neighbours' keywords, length, speaker) weigh a
    quarter more against them. Tried on the same candidates and dropped, each
    held out or in-sample within noise or worse: a question lending its keyword score
    to the turn that answers it (+0.8 R@10 in-sample, -0.5 held out: the weight picked
    per fold swung from 0 to 0.2), the query's scaffolding ("what did", stop words)
    dropped before it is embedded (-0.1 to -1.1), reciprocal-rank terms beside the
    z-scores, log-scaled BM25, a sharper cosine, a "when" question favouring turns that
    say when, and session boosts of 0.3, 0.7 and 1.0.
    """

    keyword: float = 0.8
    context: float = 0.6  # BM25 boost of the neighbours' words (the context field)
    meaning: float = 0.8
    neighbour_keyword: float = 0.5
    session: float = 0.5
    length: float = 0.6
    speaker: float = 0.4
    window: int = 2  # neighbours on each side that are a memory's context
    decay: float = 0.5  # a neighbour one step further counts this much less
    seed_depth: int = 10  # the sessions of each leg's best this many hits are read whole
    pool_depth: int = 100  # each leg's depth in hybrid mode
    max_rows: int = 3000  # session rows read per query, at most
    session_context: bool = True


def check_request(query: str, mode: str, limit: int) -> str:
    """The query stripped, or :class:`InvalidInputError` for an empty query, an unknown
    mode or a limit outside 1..1000 (every backend refuses the same way)."""
    query = query.strip()
    if not query:
        raise InvalidInputError("the search query is empty")
    if mode not in MODES:
        raise InvalidInputError(f"unknown search mode {mode!r} (use {', '.join(MODES)})")
    if not 1 <= limit <= 1000:
        raise InvalidInputError(f"limit must be between 1 and 1000, not {limit}")
    return query


def leg_depth(mode: str, limit: int, fusion: Fusion) -> int:
    """How many candidates each leg asks for. Hybrid reads whole sessions around its
    best hits, so its legs need not dig as deep for a long result list as a single leg
    does."""
    return max(limit * 4, 40) if mode != "hybrid" else max(limit, fusion.pool_depth)


def _speaker(row: dict[str, Any]) -> frozenset[str]:
    """The words of ``metadata["speaker"]``, lower-cased (empty when there is none)."""
    return _speaker_words(row.get("metadata") or "")


@lru_cache(maxsize=4096)
def _speaker_words(metadata: str) -> frozenset[str]:
    """:func:`_speaker` of a row with this metadata text. Cached: every search asks it of
    each of a few hundred candidates, mostly the same rows each time (~1 ms a search
    uncached, a tenth of that from the cache)."""
    found = _SPEAKER.search(metadata)
    if not found:
        return frozenset()
    name = json.loads(f'"{found[1]}"') if "\\" in found[1] else found[1]
    return frozenset(_WORD.findall(name.lower()))


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


def _summary(row: Mapping[str, Any]) -> bool:
    """Whether a row is a session's handoff summary (see :func:`fuse`)."""
    return _SUMMARY.search(row.get("metadata") or "") is not None


def context_sessions(candidates: Mapping[str, Candidate], fusion: Fusion) -> set[str]:
    """The conversation sessions of each leg's best ``fusion.seed_depth`` candidates:
    the sessions a hybrid search reads whole (:func:`session_context`)."""
    seeds = sorted(
        (c for c in candidates.values() if c.bm25_rank is not None),
        key=lambda c: c.bm25_rank or 0,
    )[: fusion.seed_depth]
    seeds += sorted(
        (c for c in candidates.values() if c.vector_rank is not None),
        key=lambda c: c.vector_rank or 0,
    )[: fusion.seed_depth]
    return {
        str(c.row["session_id"])
        for c in seeds
        if c.row.get("session_id") and c.row.get("source") in SESSION_SOURCES
    }


def session_context(
    candidates: dict[str, Candidate],
    rows: Sequence[dict[str, Any]],
    similarities: Sequence[float] | None,
    sessions: set[str],
    fusion: Fusion,
    *,
    partial: bool,
) -> list[Candidate]:
    """Give every memory of the sessions read whole its neighbours' keyword evidence,
    and bring those that neither leg found into the pool; returns each row's candidate.

    ``rows`` are the memories of ``sessions`` (:func:`context_sessions`) that the
    search's filter admits, in session order (session, then capture time, then id), with
    ``similarities`` their exact cosines with the query in the same order (None in a
    search without a vector). ``partial``: the rows hold only what ranking reads.

    Why: a session's memories are its captured facts in order, and the words that
    make one findable are often in the one before or after it (a question and its
    answer, a fact and what "it" refers to). So a memory gets its neighbours' BM25
    scores, halved per step away, as a signal of its own, and every memory of those
    sessions joins the pool with its exact cosine: one that neither leg found is
    reached through a neighbour.
    """
    import numpy as np

    n = len(rows)
    # A memory whose session was not read whole has no neighbours here, nor has one
    # that is not a step of the conversation: a workflow distilled from it, or the
    # session's summary, which restates the session (its neighbours' words are its
    # own words counted twice; see fuse).
    keys = [
        s if s in sessions and src in SESSION_SOURCES and not _SUMMARY.search(meta or "")
        else f"\x00{i}"
        for s, i, src, meta in (
            (r["session_id"], r["id"], r["source"], r["metadata"]) for r in rows
        )
    ]  # fmt: skip
    cands: list[Candidate] = []
    for k, row in enumerate(rows):
        c = candidates.get(row["id"])
        if c is None:
            c = candidates[row["id"]] = Candidate(row["id"], row, partial=partial)
        if similarities is not None:
            c.similarity = float(similarities[k])  # exact, leg hits and newcomers
        if keys[k] in sessions:
            c.session_key = keys[k]
        cands.append(c)

    keyword = np.asarray([c.bm25_score or 0.0 for c in cands])
    near = np.zeros(n)
    codes = np.unique(np.asarray(keys, dtype=object), return_inverse=True)[1]
    for o in range(1, fusion.window + 1):
        same = codes[o:] == codes[:-o]  # rows k and k + o share a session
        if not same.any():
            break
        w = fusion.decay ** (o - 1)
        near[:-o] += w * same * keyword[o:]
        near[o:] += w * same * keyword[:-o]
    for k, c in enumerate(cands):
        c.neighbour_keywords = float(near[k])
    return cands


def fuse(candidates: list[Candidate], query: str, fusion: Fusion) -> list[float]:
    """Hybrid relevance in 0..1: per-query z-score fusion, then the session boost.

    Why z-scores (+2.4 R@10 over max-normalised scores; the RRF baseline is below
    both): BM25 scores spread wide when a query's words are rare and bunch when
    they are common, cosines the other way; standardising each signal over this
    query's pool puts "how far above the rest" on one scale for all of them.
    Two small priors ride along: length (a longer memory holds more, and BM25's
    length normalisation over-punishes it) and the query naming the memory's
    speaker (``metadata["speaker"]``). A session's handoff summary gets no length
    prior: it is long because it restates its whole session, and with it a handoff
    that mentions the question's words in passing outranked the memory answering it.
    The session boost then adds half the best fused score in the memory's session:
    evidence that the session is about the question.
    """
    import numpy as np

    f = fusion

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


def blend(
    candidates: list[Candidate],
    mode: str,
    now: datetime,
    query: str,
    settings: SearchSettings,
    fusion: Fusion,
) -> list[tuple[float, Candidate, float, float]]:
    """Score fusion, then a multiplicative blend with salience, recency and pinning:
    (score, candidate, relevance, recency), best first (ties by id).

    Hybrid relevance comes from :func:`fuse`, scaled to 0..1 over the pool. A
    single leg's relevance is its normalised score: BM25 divided by the best BM25
    score of this query, or cosine similarity as it is. A candidate with no
    keyword match of its own or in its neighbours, and below ``min_similarity``,
    is dropped: it shares neither words nor meaning with the query. Salience,
    recency and pinning then scale relevance by at most a quarter, so they reorder
    near-equals but never lift an irrelevant memory over a relevant one.
    """
    s = settings
    best_bm25 = max((c.bm25_score or 0.0 for c in candidates), default=0.0) or 1.0
    w_rel = max(0.0, 1.0 - s.salience_weight - s.recency_weight)
    fused = fuse(candidates, query, fusion) if mode == "hybrid" and candidates else None
    out = []
    for n, c in enumerate(candidates):
        keyword = (c.bm25_score or 0.0) / best_bm25 if c.bm25_rank is not None else 0.0
        meaning = max(0.0, c.similarity or 0.0)
        if c.bm25_rank is None and not c.neighbour_keywords and meaning < s.min_similarity:
            continue
        single = keyword if mode == "bm25" else meaning
        relevance = single if fused is None else fused[n]
        rec = recency(c.row, now, s)
        salience = min(1.0, max(0.0, float(c.row.get("salience") or 0.0)))
        weight = w_rel + s.salience_weight * salience + s.recency_weight * rec
        score = relevance * weight * (1.0 + s.pinned_boost if c.row.get("pinned") else 1.0)
        out.append((score, c, relevance, rec))
    out.sort(key=lambda t: (-t[0], t[1].id))
    return out


def recency(row: Mapping[str, Any], now: datetime, settings: SearchSettings) -> float:
    """1 for a memory created or reinforced ``now``, halving every
    ``recency_half_life_days``."""
    created, reinforced = row.get("created_at"), row.get("last_reinforced_at")
    latest = (
        created
        if reinforced is None or (created is not None and created >= reinforced)
        else reinforced
    )
    if latest is None:
        return 0.0
    age_days = max(0.0, (now - latest).total_seconds() / 86400.0)
    return math.pow(0.5, age_days / max(settings.recency_half_life_days, 1e-6))


def hit(memory: Memory, score: float, c: Candidate, relevance: float, rec: float) -> SearchHit:
    """The hit for a ranked candidate whose memory is ``memory``."""
    return SearchHit(
        memory=memory, score=score, relevance=relevance,
        bm25_rank=c.bm25_rank, bm25_score=c.bm25_score,
        vector_rank=c.vector_rank, similarity=c.similarity,
        neighbour_keywords=c.neighbour_keywords,
        salience=memory.salience, recency=rec, pinned=memory.pinned,
    )  # fmt: skip
